#!/usr/bin/env bash
# ctest docs.blocks.negative_control: run_doc_blocks.py on two committed markdown files that
# must fail, without torch: Inputs/failing.md, whose second block fails, and Inputs/stale.md,
# whose torch block's committed fallback was written by another version of the block. Passes
# only when the runner exits 1, names each failing block by file:line and counts 2 failures.
# Usage: negative_control.sh PYTHON RUNNER BUILD SRC
set -uo pipefail
py=$1 runner=$2 build=$3 src=$4
out=$(AOTC_WITH_TORCH=0 "$py" "$runner" --build "$build" --src "$src" \
        --files test/docs/Inputs/failing.md test/docs/Inputs/stale.md 2>&1)
rc=$?
echo "$out"
echo "--- runner exit code: $rc"
ok=1
[[ $rc == 1 ]] || { echo "FAIL: the runner must exit 1"; ok=0; }
for want in 'test/docs/Inputs/failing.md:10: error: \[control\] block failed (exit 1)' \
            'test/docs/Inputs/stale.md:6: error: \[stale\] fallback test/docs/Inputs/stale was written by another version of this block' \
            '^doc-blocks: 1 run, 0 skipped, 2 failed$'; do
  grep -q -- "$want" <<<"$out" || { echo "FAIL: no line matching: $want"; ok=0; }
done
[[ $ok == 1 ]] && echo "negative control: the runner reported both bad blocks"
[[ $ok == 1 ]]
