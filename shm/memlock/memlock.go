// Package memlock is podshaper-shm's check that a shaped container gets the RLIMIT_MEMLOCK
// its ulimit annotation asks (docs/shm.md "Memlock as promised"): what the annotation asks,
// what the container gets (the NRI plugins' final adjustment, else its own spec, else the
// runtime's default), whether they differ, and the texts that say so. Pure: no node, no API.
package memlock

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Reason is the Warning Event's reason; Marker begins the error with which podshaper-shm
// holds a container back, which the runtime puts in the container's waiting message (the
// operator looks for it there).
const (
	Reason = "MemlockNotApplied"
	Marker = Reason + ": "
)

// The ulimit annotations, as the node's NRI ulimit-adjuster reads them (the current key
// wins; api/names.h kUlimitAnnotationPrefix).
const (
	AnnotationPrefix           = "ulimits.noderesource.dev/container."
	DeprecatedAnnotationPrefix = "ulimits.nri.containerd.io/container."
)

// Unlimited is RLIM_INFINITY.
const Unlimited uint64 = math.MaxUint64

const (
	rlimitPrefix = "RLIMIT_"
	memlockType  = rlimitPrefix + "MEMLOCK"
)

// Limit is a soft and a hard RLIMIT_MEMLOCK in bytes (Unlimited: no limit).
type Limit struct{ Soft, Hard uint64 }

// Words: one quantity when soft and hard agree ("4Mi", "unlimited"), else "soft 4Mi, hard 8Mi".
func (l Limit) Words() string {
	if l.Soft == l.Hard {
		return Bytes(l.Soft)
	}
	return "soft " + Bytes(l.Soft) + ", hard " + Bytes(l.Hard)
}

// Bytes: "unlimited", else the largest binary unit that divides it ("4Mi", "64Ki"), else
// the bytes ("4194305"): podshaper's memlock words (api/memlock.cc).
func Bytes(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	if v == 0 {
		return "0"
	}
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{60, "Ei"}, {50, "Pi"}, {40, "Ti"}, {30, "Gi"}, {20, "Mi"}, {10, "Ki"}} {
		if v%(1<<u.shift) == 0 {
			return strconv.FormatUint(v>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(v, 10)
}

// Asked is the memlock a container's annotation asks, and the annotation's key.
type Asked struct {
	Key string
	Limit
}

// entry is one item of the annotation's list; soft and hard as written.
type entry struct {
	Type string
	Soft string
	Hard string
}

// AskedOf reads the pod's ulimit annotation for the container as the ulimit-adjuster does
// (the current key if present, else the deprecated one; a YAML list of {type, soft, hard},
// keys in any case, the type with or without RLIMIT_, any case). ok is false when it asks no memlock; an
// annotation the ulimit-adjuster would refuse is an error (that plugin fails the container
// itself). 18446744073709551615 is Unlimited, and so, more leniently than the adjuster,
// "unlimited" and "-1".
func AskedOf(annotations map[string]string, container string) (a Asked, ok bool, err error) {
	var text string
	found := false
	for _, prefix := range []string{AnnotationPrefix, DeprecatedAnnotationPrefix} {
		if v, present := annotations[prefix+container]; present {
			a.Key, text, found = prefix+container, v, true
			break
		}
	}
	if !found || strings.TrimSpace(text) == "" {
		return a, false, nil
	}
	// Keys in any case, as the ulimit-adjuster reads them (sigs.k8s.io/yaml, through JSON).
	var raw []map[string]any
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		return a, false, fmt.Errorf("annotation %s is not a list of ulimits: %w", a.Key, err)
	}
	list := make([]entry, len(raw))
	for i, m := range raw {
		for k, v := range m {
			if v == nil {
				continue
			}
			switch strings.ToLower(k) {
			case "type":
				list[i].Type = fmt.Sprint(v)
			case "soft":
				list[i].Soft = fmt.Sprint(v)
			case "hard":
				list[i].Hard = fmt.Sprint(v)
			}
		}
	}
	for i, e := range list {
		if normalType(e.Type) != memlockType {
			continue
		}
		if ok {
			return a, false, fmt.Errorf("annotation %s gives RLIMIT_MEMLOCK twice", a.Key)
		}
		soft, err := parseValue(e.Soft)
		if err != nil {
			return a, false, fmt.Errorf("annotation %s: entry %d: soft %w", a.Key, i, err)
		}
		hard, err := parseValue(e.Hard)
		if err != nil {
			return a, false, fmt.Errorf("annotation %s: entry %d: hard %w", a.Key, i, err)
		}
		if soft > hard {
			return a, false, fmt.Errorf("annotation %s: RLIMIT_MEMLOCK soft %s is above hard %s", a.Key, Bytes(soft), Bytes(hard))
		}
		a.Limit, ok = Limit{Soft: soft, Hard: hard}, true
	}
	return a, ok, nil
}

func normalType(t string) string {
	return rlimitPrefix + strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(t)), rlimitPrefix)
}

func parseValue(s string) (uint64, error) {
	switch s = strings.TrimSpace(s); s {
	case "":
		return 0, errors.New("is missing")
	case "unlimited", "-1":
		return Unlimited, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of bytes or unlimited", s)
	}
	return v, nil
}

// Rlimit is one resource limit as the runtime passes it, and the NRI plugin that set it
// ("10-ulimit-adjuster"; none in a container's own spec).
type Rlimit struct {
	Type       string
	Soft, Hard uint64
	By         string
}

// Source says where the limit a container gets comes from.
type Source int

// The sources, in the order the runtime takes them.
const (
	FromDefault Source = iota // nothing sets it: the runtime's own limit
	FromSpec                  // the container's spec, before the NRI plugins
	FromPlugin                // an NRI plugin's adjustment
	FromProcess               // read from its running process: where from is not known
)

// Got is the limit a container gets, and from where.
type Got struct {
	Limit
	Source
	Plugin string // FromPlugin: which ("10-ulimit-adjuster"), when the runtime says
}

// Effective: the RLIMIT_MEMLOCK in the NRI plugins' final adjustment, else in the
// container's own rlimits, else the runtime's default (the last entry of a list wins).
func Effective(adjusted, own []Rlimit, runtimeDefault Limit) Got {
	if r, ok := last(adjusted); ok {
		return Got{Limit: Limit{r.Soft, r.Hard}, Source: FromPlugin, Plugin: r.By}
	}
	if r, ok := last(own); ok {
		return Got{Limit: Limit{r.Soft, r.Hard}, Source: FromSpec}
	}
	return Got{Limit: runtimeDefault, Source: FromDefault}
}

func last(rs []Rlimit) (Rlimit, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if normalType(rs[i].Type) == memlockType {
			return rs[i], true
		}
	}
	return Rlimit{}, false
}

// Check is one container's memlock against its annotation, on a node.
type Check struct {
	Node, Container string
	Asked
	Got
}

// Applied says whether the container gets what was asked.
func (c Check) Applied() bool { return c.Got.Limit == c.Asked.Limit }

// whence: "the runtime's default", "set in its spec", "set by NRI plugin 10-x".
func (g Got) whence() string {
	switch {
	case g.Source == FromDefault:
		return "the runtime's default"
	case g.Source == FromSpec:
		return "set in its spec"
	case g.Source == FromProcess:
		return "read from its process"
	case g.Plugin != "":
		return "set by NRI plugin " + g.Plugin
	default:
		return "set by an NRI plugin"
	}
}

func (c Check) fix() string {
	if c.Source == FromPlugin {
		who := "the NRI plugin that sets it"
		if c.Plugin != "" {
			who = "NRI plugin " + c.Plugin
		}
		return "Fix: make " + who + " set what the annotation asks, or leave RLIMIT_MEMLOCK to the node's NRI ulimit-adjuster plugin."
	}
	return "Fix: start the node's NRI ulimit-adjuster plugin."
}

// HoldError: the error with which podshaper-shm refuses the container's creation; it
// begins with Marker. plugins: the NRI plugins the runtime consulted ("90-podshaper-shm").
func HoldError(c Check, plugins []string) string {
	setBy := ""
	if c.Source != FromPlugin {
		setBy = "; no NRI plugin set it"
	}
	here := "none"
	if len(plugins) > 0 {
		here = strings.Join(plugins, ", ")
	}
	return fmt.Sprintf("%snode %s did not apply RLIMIT_MEMLOCK %s that %s asks (it would get %s, %s%s; NRI plugins here: %s). "+
		"podshaper-shm holds the container back until the node applies it; the kubelet tries again. %s",
		Marker, c.Node, c.Asked.Words(), c.Key, c.Got.Words(), c.whence(), setBy, here, c.fix())
}

// HeldMessage: the Warning Event's text when podshaper-shm holds the container back.
func HeldMessage(c Check) string {
	return fmt.Sprintf("container %s is held back: node %s did not apply RLIMIT_MEMLOCK %s (%s); it would get %s, %s. "+
		"It starts as soon as the node applies it (the kubelet retries). %s",
		c.Container, c.Node, c.Asked.Words(), c.Key, c.Got.Words(), c.whence(), c.fix())
}

// StartedMessage: the Warning Event's text when the container runs with another limit
// than asked (read from its process: where it came from is the runtime's default when it
// equals that, else unknown).
func StartedMessage(c Check) string {
	got := c.Got.Words()
	if c.Source == FromDefault {
		got += " (the runtime's default)"
	}
	return fmt.Sprintf("container %s started with RLIMIT_MEMLOCK %s, not the %s that %s asks: node %s did not apply it. "+
		"Fix: start the node's NRI ulimit-adjuster plugin, then restart the pod once the node applies it.",
		c.Container, got, c.Asked.Words(), c.Key, c.Node)
}

// ParseProcLimits reads the "Max locked memory" line of a /proc/PID/limits.
func ParseProcLimits(text string) (Limit, error) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return Limit{}, fmt.Errorf("limits: %q: no soft and hard limit", line)
		}
		soft, err := procValue(f[0])
		if err != nil {
			return Limit{}, fmt.Errorf("limits: %q: soft %w", line, err)
		}
		hard, err := procValue(f[1])
		if err != nil {
			return Limit{}, fmt.Errorf("limits: %q: hard %w", line, err)
		}
		return Limit{Soft: soft, Hard: hard}, nil
	}
	return Limit{}, errors.New(`limits: no "Max locked memory" line`)
}

func procValue(s string) (uint64, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of bytes or unlimited", s)
	}
	return v, nil
}
