# Shared helpers for the command-line tests. Each test: `source lib.sh`, then check/fail.
set -euo pipefail
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# check "description" command...: passes when the command succeeds.
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
contains() { grep -qF -- "$2" <<<"$1"; }
finish() { if [[ $failures -gt 0 ]]; then echo "$failures check(s) failed" >&2; exit 1; fi; echo "all checks passed"; }
