# The processes a script starts in the background and records, sourced by cluster.sh
# (the control plane) and node.sh (the real node). The caller sets procs_dir (its
# pids/ and logs/ live there) and defines die.

# Free ports below the kernel's ephemeral range, so that no outgoing connection
# takes one between choosing it and binding it.
free_ports() {  # free_ports N
  python3 - "$1" <<'PY'
import random, socket, sys
chosen = []
while len(chosen) < int(sys.argv[1]):
    port = random.randint(20000, 31999)
    if port in chosen: continue
    with socket.socket() as s:
        try: s.bind(("127.0.0.1", port))
        except OSError: continue
    chosen.append(port)
print(" ".join(map(str, chosen)))
PY
}

running() {  # running NAME: the recorded process is alive and is still ours (pids get reused)
  local f=$procs_dir/pids/$1.pid
  [[ -f $f ]] || return 1
  local pid argv0; pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1)
  [[ $(basename "$argv0") == "$1" ]]
}

start() {  # start NAME CMD...: run in the background, record the pid, log to logs/NAME.log
  local name=$1; shift
  "$@" >>"$procs_dir/logs/$name.log" 2>&1 &
  local pid=$!
  echo $pid >"$procs_dir/pids/$name.pid"
  # The background shell execs the command; until it has, /proc shows the shell, and
  # `running` (which checks the name against pid reuse) would call it gone. On a loaded
  # machine that takes more than the moment before the first check.
  local argv0
  for _ in $(seq 200); do
    argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1)
    [[ $(basename "$argv0") == "$name" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
}

wait_for() {  # wait_for SECONDS NAME CMD...: until CMD succeeds; fails fast if NAME died
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds)) log=$procs_dir/logs/$what.log
  until "$@" >/dev/null 2>&1; do
    running "$what" || { tail -20 "$log" >&2; die "$what exited (log: $log)"; }
    [[ $SECONDS -lt $deadline ]] || { tail -20 "$log" >&2; die "$what: '$*' did not succeed in ${seconds}s (log: $log)"; }
    sleep 0.3
  done
}

# stop_one NAME [SIGNAL]: the recorded process; SIGTERM, then SIGKILL after stop_grace
# seconds (default 5), or SIGNAL and the same wait.
stop_one() {
  local f=$procs_dir/pids/$1.pid
  [[ -f $f ]] || return 0
  local pid; pid=$(cat "$f")
  if running "$1"; then
    kill -"${2:-TERM}" "$pid" 2>/dev/null || true
    for _ in $(seq $((${stop_grace:-5} * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

statuses() {  # statuses NAME...: "NAME: running (pid N)" or "NAME: stopped", a line each
  local name
  for name in "$@"; do
    if running "$name"; then echo "$name: running (pid $(cat "$procs_dir/pids/$name.pid"))"; else echo "$name: stopped"; fi
  done
}
