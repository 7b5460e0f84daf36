package memlock

import (
	"strings"
	"testing"
)

const mi uint64 = 1 << 20

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		v    uint64
		want string
	}{
		{0, "0"}, {4 * mi, "4Mi"}, {8 * mi, "8Mi"}, {64 << 10, "64Ki"}, {2 << 30, "2Gi"},
		{4*mi + 1, "4194305"}, {Unlimited, "unlimited"}, {Unlimited - 1, "18446744073709551614"},
	} {
		if got := Bytes(c.v); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.v, got, c.want)
		}
	}
	if got := (Limit{4 * mi, 8 * mi}).Words(); got != "soft 4Mi, hard 8Mi" {
		t.Errorf("Words = %q", got)
	}
}

func TestAskedOf(t *testing.T) {
	const cur, old = AnnotationPrefix + "train", DeprecatedAnnotationPrefix + "train"
	for _, c := range []struct {
		name        string
		annotations map[string]string
		want        Asked
		ok          bool
		err         string
	}{
		{"the webhook's", map[string]string{cur: "- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n"},
			Asked{cur, Limit{4 * mi, 4 * mi}}, true, ""},
		{"flow, lower case, soft below hard", map[string]string{cur: "[{type: nofile, soft: 1024, hard: 4096}, {type: memlock, hard: 8388608, soft: 4194304}]"},
			Asked{cur, Limit{4 * mi, 8 * mi}}, true, ""},
		{"keys in any case, as the adjuster reads them", map[string]string{cur: "- {Type: MEMLOCK, SOFT: 4194304, Hard: 4194304}"},
			Asked{cur, Limit{4 * mi, 4 * mi}}, true, ""},
		{"unlimited as RLIM_INFINITY", map[string]string{cur: "- {type: RLIMIT_MEMLOCK, soft: 18446744073709551615, hard: 18446744073709551615}"},
			Asked{cur, Limit{Unlimited, Unlimited}}, true, ""},
		{"unlimited and -1", map[string]string{cur: "- {type: memlock, soft: -1, hard: unlimited}"},
			Asked{cur, Limit{Unlimited, Unlimited}}, true, ""},
		{"deprecated key alone", map[string]string{old: "- {type: memlock, soft: 4194304, hard: 4194304}"},
			Asked{old, Limit{4 * mi, 4 * mi}}, true, ""},
		{"current key wins", map[string]string{old: "- {type: memlock, soft: 1, hard: 1}", cur: "- {type: memlock, soft: 2, hard: 2}"},
			Asked{cur, Limit{2, 2}}, true, ""},
		{"current key without memlock wins", map[string]string{old: "- {type: memlock, soft: 1, hard: 1}", cur: "- {type: nofile, soft: 2, hard: 2}"},
			Asked{Key: cur}, false, ""},
		{"another container's", map[string]string{AnnotationPrefix + "sidecar": "- {type: memlock, soft: 1, hard: 1}"},
			Asked{}, false, ""},
		{"empty", map[string]string{cur: "  "}, Asked{Key: cur}, false, ""},
		{"not a list", map[string]string{cur: "memlock: 4Mi"}, Asked{Key: cur}, false, "annotation " + cur + " is not a list of ulimits"},
		{"twice", map[string]string{cur: "- {type: memlock, soft: 1, hard: 1}\n- {type: RLIMIT_MEMLOCK, soft: 1, hard: 1}"},
			Asked{Key: cur}, false, "gives RLIMIT_MEMLOCK twice"},
		{"soft above hard", map[string]string{cur: "- {type: memlock, soft: 8388608, hard: 4194304}"},
			Asked{Key: cur}, false, "RLIMIT_MEMLOCK soft 8Mi is above hard 4Mi"},
		{"a quantity", map[string]string{cur: "- {type: memlock, soft: 4Mi, hard: 4Mi}"},
			Asked{Key: cur}, false, `entry 0: soft "4Mi" is not a number of bytes or unlimited`},
		{"no hard", map[string]string{cur: "- {type: memlock, soft: 1}"},
			Asked{Key: cur}, false, "entry 0: hard is missing"},
	} {
		got, ok, err := AskedOf(c.annotations, "train")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || ok != c.ok || (ok && got != c.want) || (!ok && got.Key != c.want.Key) {
			t.Errorf("%s: AskedOf = %+v, %v, %v; want %+v, %v", c.name, got, ok, err, c.want, c.ok)
		}
	}
}

func TestEffective(t *testing.T) {
	def := Limit{8 * mi, 8 * mi}
	nofile := Rlimit{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}
	for _, c := range []struct {
		name          string
		adjusted, own []Rlimit
		want          Got
	}{
		{"nothing sets it", nil, []Rlimit{nofile}, Got{def, FromDefault, ""}},
		{"its spec", nil, []Rlimit{nofile, {Type: "RLIMIT_MEMLOCK", Soft: 1, Hard: 2}}, Got{Limit{1, 2}, FromSpec, ""}},
		{"a plugin over its spec", []Rlimit{nofile, {Type: "RLIMIT_MEMLOCK", Soft: 4 * mi, Hard: 4 * mi, By: "10-ulimit-adjuster"}},
			[]Rlimit{{Type: "RLIMIT_MEMLOCK", Soft: 1, Hard: 2}}, Got{Limit{4 * mi, 4 * mi}, FromPlugin, "10-ulimit-adjuster"}},
		{"lower case type, the last wins", []Rlimit{{Type: "memlock", Soft: 1, Hard: 1}, {Type: "memlock", Soft: 3, Hard: 3, By: "20-x"}},
			nil, Got{Limit{3, 3}, FromPlugin, "20-x"}},
	} {
		if got := Effective(c.adjusted, c.own, def); got != c.want {
			t.Errorf("%s: Effective = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestTexts(t *testing.T) {
	if Marker != "MemlockNotApplied: " || Reason != "MemlockNotApplied" {
		t.Fatalf("Marker %q, Reason %q: the operator looks for \"MemlockNotApplied: \"", Marker, Reason)
	}
	c := Check{Node: "real-h200x4-0", Container: "train",
		Asked: Asked{AnnotationPrefix + "train", Limit{4 * mi, 4 * mi}},
		Got:   Got{Limit: Limit{8 * mi, 8 * mi}, Source: FromDefault}}
	if c.Applied() {
		t.Error("8Mi for 4Mi: applied")
	}
	for _, x := range []struct{ got, want string }{
		{HoldError(c, []string{"90-podshaper-shm"}), "MemlockNotApplied: node real-h200x4-0 did not apply RLIMIT_MEMLOCK 4Mi that " +
			"ulimits.noderesource.dev/container.train asks (it would get 8Mi, the runtime's default; no NRI plugin set it; " +
			"NRI plugins here: 90-podshaper-shm). podshaper-shm holds the container back until the node applies it; the kubelet " +
			"tries again. Fix: start the node's NRI ulimit-adjuster plugin."},
		{HeldMessage(c), "container train is held back: node real-h200x4-0 did not apply RLIMIT_MEMLOCK 4Mi " +
			"(ulimits.noderesource.dev/container.train); it would get 8Mi, the runtime's default. It starts as soon as the node " +
			"applies it (the kubelet retries). Fix: start the node's NRI ulimit-adjuster plugin."},
		{StartedMessage(c), "container train started with RLIMIT_MEMLOCK 8Mi (the runtime's default), not the 4Mi that " +
			"ulimits.noderesource.dev/container.train asks: node real-h200x4-0 did not apply it. Fix: start the node's NRI " +
			"ulimit-adjuster plugin, then restart the pod once the node applies it."},
	} {
		if x.got != x.want {
			t.Errorf("got  %q\nwant %q", x.got, x.want)
		}
	}
	c.Got = Got{Limit: Limit{2 * mi, 4 * mi}, Source: FromPlugin, Plugin: "50-policy"}
	want := "MemlockNotApplied: node real-h200x4-0 did not apply RLIMIT_MEMLOCK 4Mi that ulimits.noderesource.dev/container.train " +
		"asks (it would get soft 2Mi, hard 4Mi, set by NRI plugin 50-policy; NRI plugins here: 50-policy, 90-podshaper-shm). " +
		"podshaper-shm holds the container back until the node applies it; the kubelet tries again. Fix: make NRI plugin " +
		"50-policy set what the annotation asks, or leave RLIMIT_MEMLOCK to the node's NRI ulimit-adjuster plugin."
	if got := HoldError(c, []string{"50-policy", "90-podshaper-shm"}); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	c.Got = Got{Limit: Limit{Unlimited, Unlimited}, Source: FromProcess}
	if got := StartedMessage(c); !strings.HasPrefix(got, "container train started with RLIMIT_MEMLOCK unlimited, not the 4Mi") {
		t.Errorf("StartedMessage = %q", got)
	}
	c.Got = Got{Limit: Limit{1, 1}, Source: FromSpec}
	if got := HeldMessage(c); !strings.Contains(got, "it would get 1, set in its spec.") {
		t.Errorf("HeldMessage = %q", got)
	}
}

func TestParseProcLimits(t *testing.T) {
	const head = "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n"
	for _, c := range []struct {
		text string
		want Limit
		err  string
	}{
		{head + "Max locked memory         8388608              8388608              bytes     \nMax address space unlimited unlimited bytes\n",
			Limit{8 * mi, 8 * mi}, ""},
		{head + "Max locked memory         unlimited            unlimited            bytes     \n", Limit{Unlimited, Unlimited}, ""},
		{head + "Max locked memory         65536                unlimited            bytes     \n", Limit{64 << 10, Unlimited}, ""},
		{head, Limit{}, `no "Max locked memory" line`},
		{head + "Max locked memory         lots                 unlimited            bytes\n", Limit{}, `soft "lots" is not a number`},
		{head + "Max locked memory 1\n", Limit{}, "no soft and hard limit"},
	} {
		got, err := ParseProcLimits(c.text)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("err %v, want %q", err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseProcLimits = %+v, %v; want %+v", got, err, c.want)
		}
	}
}
