#!/usr/bin/env bash
# fork_cli.sh BUILD_DIR SOURCE_DIR - frt fork on the demo model (cpu):
# --receipt --verify exits 0 and writes a receipt whose fields are all there
# (model and fingerprint, trunk tokens and digest, capsule bytes, per round
# the wall time and per branch the tokens, preview and finish reason,
# all_diverge, bit_identity ok with every branch checked, machine, software);
# sampled branches diverge, greedy ones do not; --trunk FILE gives the same
# trunk as -p with its text; the same command twice gives the same tokens;
# a broken check (the FRT_FORK_TEST_PERTURB hook) makes --verify exit 1 with
# a loud message and is recorded without --verify; usage errors exit 2.
set -u
B="$1"
SRC="$2"
FRT="$B/frt"
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
T="$(mktemp -d /tmp/frt_fork_cli.XXXXXX)"
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
    local d="$1"; shift
    if "$@"; then echo "ok   $d"; else echo "FAIL $d"; fail=1; fi
}
q() { jq -e "$1" "$2" >/dev/null; } # q FILTER FILE: the filter is true
M=(-m "$SRC/models/frt-demo" --backend cpu --threads 1 -q --max-seq 512)
P='def parse_args(argv):'

"$FRT" fork "${M[@]}" -p "$P" --branches 3 --tokens 6 --rounds 2 --temperature 0.9 --seed 5 \
    --receipt "$T/r.json" --verify >"$T/out" 2>"$T/err"
check "fork --verify: exit 0" test $? -eq 0
check "prints the verdict" grep -q "bit identity: ok (6 branches" "$T/out"
R="$T/r.json"
check "receipt: model, arch, fingerprint" q '.model.arch == "qwen35" and (.model.fingerprint | test("^[0-9a-f]{16}$"))' "$R"
check "receipt: slots and their memory" q '.model.branch_slots == 3 and .model.state_bytes_all_slots == 3 * .model.state_bytes_per_slot' "$R"
check "receipt: trunk tokens and digest" q '.trunk.tokens > 0 and (.trunk.digest | test("^[0-9a-f]{16}$"))' "$R"
check "receipt: capsule bytes" q '.capsule_bytes > 0' "$R"
check "receipt: 2 rounds of 3 branches" q '(.rounds | length) == 2 and all(.rounds[]; (.branches | length) == 3 and .wall_s > 0)' "$R"
check "receipt: branch fields" q 'all(.rounds[].branches[]; (.tokens | length) >= 1 and (.tokens | length) <= 6 and (.finish_reason == "length" or .finish_reason == "eos") and (.text_preview | type) == "string")' "$R"
check "receipt: a round's parts: fork, steps, ms a step" q 'all(.rounds[]; .fork_s > 0 and .decode_s > 0 and .steps >= 1 and .fork_s + .decode_s <= .wall_s) and .step_ms_median > 0' "$R"
check "receipt: the check's logits read, measured apart" q 'all(.rounds[]; .check_read_s > 0)' "$R"
check "receipt: seeds per round" q '.rounds[0].seed == 5 and .rounds[1].seed == 6' "$R"
check "receipt: bit identity ok, every branch" q '.bit_identity.ok == true and .bit_identity.branches_checked == 6 and .bit_identity.mismatches == 0 and .bit_identity.first_step_logits_compared >= 1' "$R"
check "receipt: sampled branches diverge" q '.all_diverge == true' "$R"
check "receipt: machine" q '.machine.device.backend == "cpu" and .machine.device.memory_bytes > 0 and (.machine.device.name | length) > 0' "$R"
check "receipt: software" q '(.software.frt_version | length) > 0 and has("software") and (.software | has("git_commit") and has("git_dirty"))' "$R"

printf '%s' "$P" >"$T/trunk.txt"
"$FRT" fork "${M[@]}" --trunk "$T/trunk.txt" --branches 3 --tokens 6 --rounds 2 --temperature 0.9 --seed 5 \
    --receipt "$T/r2.json" --verify >/dev/null 2>&1
check "--trunk FILE: exit 0" test $? -eq 0
check "--trunk FILE: the same trunk digest and the same tokens as -p" \
    test "$(jq -c '[.trunk.digest, [.rounds[].branches[].tokens]]' "$T/r2.json")" = "$(jq -c '[.trunk.digest, [.rounds[].branches[].tokens]]' "$R")"

"$FRT" fork "${M[@]}" -p "$P" --branches 2 --tokens 5 --rounds 1 --temperature 0 --receipt "$T/g.json" --verify >/dev/null 2>&1
check "greedy fork --verify: exit 0" test $? -eq 0
check "greedy branches are the same and do not diverge" q '.all_diverge == false and .rounds[0].branches[0].tokens == .rounds[0].branches[1].tokens and .bit_identity.ok' "$T/g.json"

FRT_FORK_TEST_PERTURB=1 "$FRT" fork "${M[@]}" -p "$P" --branches 2 --tokens 4 --rounds 1 --verify >/dev/null 2>"$T/err"
check "a broken check: --verify exits 1" test $? -eq 1
check "a broken check: loud message" grep -q "BIT IDENTITY BROKEN" "$T/err"
FRT_FORK_TEST_PERTURB=1 "$FRT" fork "${M[@]}" -p "$P" --branches 2 --tokens 4 --rounds 1 --receipt "$T/b.json" >/dev/null 2>&1
check "a broken check without --verify: exit 0" test $? -eq 0
check "a broken check is recorded" q '.bit_identity.ok == false and .bit_identity.mismatches == 1' "$T/b.json"

"$FRT" fork "${M[@]}" --branches 2 >/dev/null 2>"$T/err"
check "no trunk: exit 2" test $? -eq 2
"$FRT" fork "${M[@]}" -p x --trunk "$T/trunk.txt" >/dev/null 2>"$T/err"
check "two trunks: exit 2" test $? -eq 2
"$FRT" fork "${M[@]}" -p x --branches 0 >/dev/null 2>"$T/err"
check "--branches 0: exit 2" test $? -eq 2
"$FRT" fork "${M[@]}" -p x --tokens 1 >/dev/null 2>"$T/err"
check "--tokens 1: exit 2" test $? -eq 2
"$FRT" fork "${M[@]}" --trunk "$T/missing.txt" >/dev/null 2>"$T/err"
check "a missing trunk file: exit 1 with its name" sh -c "test $? -eq 1 && grep -q missing.txt '$T/err'"
"$FRT" fork "${M[@]}" -p "$P" --tokens 600 >/dev/null 2>"$T/err"
check "trunk + tokens past max_seq: exit 1" sh -c "test $? -eq 1 && grep -q max_seq '$T/err'"
"$FRT" fork "${M[@]}" -p x --trunk-random 10 >/dev/null 2>"$T/err"
check "-p and --trunk-random: exit 2" test $? -eq 2
"$FRT" gen-model --shape tiny-dense --out "$T/td" -q >/dev/null 2>&1
"$FRT" fork -m "$T/td" --backend cpu --trunk-random 90 --branches 3 --tokens 6 --rounds 2 --seed 4 \
    --receipt "$T/tr.json" --verify >/dev/null 2>&1
check "--trunk-random on a checkpoint without a tokenizer: exit 0, 90 trunk tokens, bit identity ok" \
    q '.trunk.tokens == 90 and .bit_identity.ok and (.rounds | length) == 2' "$T/tr.json"
"$FRT" fork -m "$T/td" --backend cpu -p hello --branches 2 >/dev/null 2>"$T/err"
check "text trunk without a tokenizer: exit 1, says so" sh -c "test $? -eq 1 && grep -q tokenizer '$T/err'"
exit $fail
