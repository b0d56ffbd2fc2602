# policy_lib.bash - shared setup of the frt policy end-to-end tests (sourced,
# not a test itself).
#
#   policy_init NAME BUILD_DIR   sets FRT, PY, T (a work dir removed at exit), fail=0;
#                                exit 1 without BUILD_DIR/frt, 77 without a python3
#                                with Pillow + numpy or without spm_train
#   policy_spm SOURCE_DIR        images and a corpus (scripts/ref/policy_io_goldens.py) in $T,
#                                and a SentencePiece model trained on it: $T/spm.model
#   check WHAT CMD...            prints ok / FAIL; a failure sets fail=1

policy_init() {
    FRT="$2/frt"
    [ -x "$FRT" ] || { echo "no $FRT"; exit 1; }
    # Debian's python (CI), else the one on PATH (the GPU machine's)
    PY=""
    for p in /usr/bin/python3 python3; do
        if "$p" -c 'import PIL, numpy' 2>/dev/null; then PY=$p; break; fi
    done
    if [ -z "$PY" ] || ! command -v spm_train >/dev/null; then
        echo "SKIP: needs a python3 with Pillow + numpy (/usr/bin/python3: scripts/install-deps.sh) and spm_train"; exit 77
    fi
    T="$(mktemp -d "/tmp/frt_$1.XXXXXX")"
    trap 'rm -rf "$T"' EXIT
    fail=0
}

policy_spm() {
    $PY "$1/scripts/ref/policy_io_goldens.py" "$T" >/dev/null || exit 1
    spm_train --input="$T/corpus.txt" --model_prefix="$T/spm" --vocab_size=1000 --hard_vocab_limit=false \
        --model_type=unigram --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 --byte_fallback=true \
        --normalization_rule_name=identity --add_dummy_prefix=false --remove_extra_whitespaces=false \
        --minloglevel=2 >/dev/null 2>&1 || { echo "spm_train failed"; exit 1; }
}

check() {
    local what=$1; shift
    if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
