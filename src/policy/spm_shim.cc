/*
 * policy/spm_shim.cc - the C face of libsentencepiece (a C++ library) for
 * frt/policy_io.h: load a serialized model, count pieces, the BOS id, and
 * Encode. The only C++ in frt; nothing C++ crosses this file's boundary
 * (every entry point is extern "C" and catches what the library throws).
 * Built from the Debian package libsentencepiece-dev.
 */
#include "policy/spm.h"

#include "frt/status.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct frt_policy_tokenizer {
    sentencepiece::SentencePieceProcessor sp;
};

extern "C" int frt_spm_load(const void *data, size_t len, frt_policy_tokenizer **out)
{
    frt_policy_tokenizer *tok = nullptr;
    try {
        tok = new frt_policy_tokenizer();
        const auto st = tok->sp.LoadFromSerializedProto(
            std::string_view(static_cast<const char *>(data), len));
        if (!st.ok()) {
            std::string msg = st.ToString();
            delete tok;
            return frt_error(FRT_ERR_FORMAT, "not a SentencePiece model: %s", msg.c_str());
        }
    } catch (const std::bad_alloc &) {
        delete tok;
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory loading a SentencePiece model");
    } catch (const std::exception &e) {
        delete tok;
        return frt_error(FRT_ERR_FORMAT, "not a SentencePiece model: %s", e.what());
    }
    *out = tok;
    return 0;
}

extern "C" void frt_spm_free(frt_policy_tokenizer *tok)
{
    delete tok;
}

extern "C" int frt_spm_vocab_size(const frt_policy_tokenizer *tok)
{
    return tok->sp.GetPieceSize();
}

extern "C" int frt_spm_bos_id(const frt_policy_tokenizer *tok)
{
    return tok->sp.bos_id();
}

extern "C" int frt_spm_encode(const frt_policy_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                              size_t *n_ids)
{
    std::vector<int> v;
    try {
        const auto st = tok->sp.Encode(std::string_view(text, len), &v);
        if (!st.ok()) return frt_error(FRT_ERR_BACKEND, "sentencepiece: %s", st.ToString().c_str());
    } catch (const std::bad_alloc &) {
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory in sentencepiece");
    } catch (const std::exception &e) {
        return frt_error(FRT_ERR_BACKEND, "sentencepiece: %s", e.what());
    }
    *ids = nullptr;
    *n_ids = v.size();
    if (v.empty()) return 0;
    *ids = static_cast<int32_t *>(std::malloc(v.size() * sizeof(int32_t)));
    if (!*ids) {
        *n_ids = 0;
        return frt_error(FRT_ERR_OUT_OF_MEMORY, "out of memory (%zu token ids)", v.size());
    }
    for (size_t i = 0; i < v.size(); i++) (*ids)[i] = v[i];
    return 0;
}
