# Helpers shared by the end-to-end tests (after tests/cli/lib.sh).
quiet() { "$@" >/dev/null; }

# eventually SECONDS WANT CMD...: retry CMD until its output matches WANT (a bash glob;
# plain text matches itself); on timeout, say what it printed last.
eventually() {
  local deadline=$((SECONDS + $1)) want=$2 got
  shift 2
  while :; do
    got=$("$@" 2>&1) || true
    # shellcheck disable=SC2053  # WANT is a pattern on purpose
    [[ $got == $want ]] && return 0
    if [[ $SECONDS -ge $deadline ]]; then
      echo "  wanted: $want" >&2; echo "  got:    ${got:0:2000}" >&2
      return 1
    fi
    sleep 0.3
  done
}
# until_ok SECONDS CMD...: retry CMD until it succeeds
until_ok() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [[ $SECONDS -lt $deadline ]] || return 1; sleep 0.3; done
}

# Free ports below the kernel's ephemeral range (as scripts/cluster.sh chooses them).
free_port() {
  python3 - <<'PY'
import random, socket
while True:
    port = random.randint(20000, 31999)
    with socket.socket() as s:
        try: s.bind(("127.0.0.1", port))
        except OSError: continue
    print(port); break
PY
}
