# policy_lib.bash - sourced by the policy input tests (policy_prepare.sh,
# policy_run_image.sh) after B, SRC and a name are set: checks the tools
# (skips with 77 without them), makes $T (removed on exit), writes the
# camera images and text of scripts/ref/policy_io_goldens.py there and
# trains a SentencePiece model on that text ($T/spm.model). Sets FRT, PY,
# T, fail.
FRT="$B/frt"
PY=/usr/bin/python3
[ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
if ! $PY -c 'import PIL, numpy' 2>/dev/null || ! command -v spm_train >/dev/null; then
    echo "SKIP: needs /usr/bin/python3 with Pillow + numpy and spm_train (scripts/install-deps.sh)"; exit 77
fi
T="$(mktemp -d "/tmp/frt_${POLICY_TEST_NAME:-policy}.XXXXXX")"
trap 'rm -rf "$T"' EXIT
fail=0

$PY "$SRC/scripts/ref/policy_io_goldens.py" "$T" >/dev/null || exit 1
spm_train --input="$T/corpus.txt" --model_prefix="$T/spm" --vocab_size=1000 --hard_vocab_limit=false \
    --model_type=unigram --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 --byte_fallback=true \
    --normalization_rule_name=identity --add_dummy_prefix=false --remove_extra_whitespaces=false \
    --minloglevel=2 >/dev/null 2>&1 || { echo "spm_train failed"; exit 1; }
