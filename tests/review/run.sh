#!/usr/bin/env bash
# The review corpus: public training manifests' shapes (corpus/, written for these tests),
# each case a `podshaper-webhook review` command line run in corpus/ (cases/<case>/args)
# with its expected stdout, stderr and exit code (cases/<case>/{stdout,stderr,exit}).
# PODSHAPER_UPDATE_GOLDEN=1 rewrites the expectations; review the diff.
set -uo pipefail
bin=$(realpath "$1")
[[ -x $bin ]] || { echo "FAIL: $1 is not a program"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failed=0 count=0
for dir in "$here"/cases/*/; do
  name=$(basename "$dir")
  read -r -a args < "$dir/args"
  (cd "$here/corpus" && "$bin" review "${args[@]}" >"$tmp/stdout" 2>"$tmp/stderr"); echo $? > "$tmp/exit"
  count=$((count + 1))
  if [[ ${PODSHAPER_UPDATE_GOLDEN:-} == 1 ]]; then
    cp "$tmp/stdout" "$tmp/stderr" "$tmp/exit" "$dir"
    continue
  fi
  for f in exit stderr stdout; do
    if ! diff -u "$dir/$f" "$tmp/$f" > "$tmp/diff"; then
      echo "FAIL: $name: $f differs from cases/$name/$f (review ${args[*]}):"
      head -n 60 "$tmp/diff"
      failed=$((failed + 1))
      break
    fi
  done
done
(( count > 0 )) || { echo "FAIL: no case in $here/cases"; exit 1; }
echo "review corpus: $count cases, $failed failed"
(( failed == 0 ))
