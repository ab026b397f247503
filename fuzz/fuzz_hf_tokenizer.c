/* fuzz_hf_tokenizer.c: fuzz target for the tokenizer.json reader
 * (data/hf_tokenizer.h): any input gets an answer (a vocabulary, or
 * DL_ERR_DATA with a message), never a crash or a leak; a vocabulary that
 * loads encodes a fixed text and the input itself (repaired to UTF-8),
 * whose tokens' bytes give the text back (added tokens are their text;
 * unless a Split removes text), the plain scan and the heap merge alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/hf_tokenizer.h"
#include "data/utf8.h"
#include "fuzz/fuzz.h"

/* Encodes text[0..n) both ways; aborts where they differ or the bytes do
 * not give the text back. */
static void round_trip(const struct dl_bpe *b, const unsigned char *text, size_t n, int removes)
{
    struct dl_token_stream scan = {0}, heap = {0};
    struct dl_error err = {0};
    int a = dl_bpe_encode_with(b, (const char *)text, n, DL_BPE_MERGE_SCAN, &scan, &err);
    int c = dl_bpe_encode_with(b, (const char *)text, n, DL_BPE_MERGE_HEAP, &heap, &err);
    if (a != c || (a == DL_OK && (scan.n != heap.n || (scan.n && memcmp(scan.id, heap.id, sizeof *scan.id *
                                                                           (size_t)scan.n)))))
        abort();
    size_t at = 0;
    for (long i = 0; a == DL_OK && i < scan.n; i++) {
        size_t len;
        const unsigned char *bytes = dl_bpe_bytes(b, scan.id[i], &len);
        if (!bytes || (!removes && (at + len > n || memcmp(text + at, bytes, len) != 0)))
            abort();
        at += len;
    }
    if (a == DL_OK && at != n && !removes)
        abort();
    dl_token_stream_free(&scan);
    dl_token_stream_free(&heap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dl_bpe *b = NULL;
    struct dl_error err = {0};
    int rc = dl_hf_tokenizer_parse("fuzz.json", (const char *)data, size, &b, &err);
    if (rc != DL_OK && (rc != DL_ERR_DATA || !err.msg[0]))
        abort(); /* a refusal is a data error that says why */
    if (rc != DL_OK)
        return 0;
    int removes = memmem(data, size, "Removed", 7) != NULL;
    static const char fixed[] = "Hello <|endoftext|> world's 12345 \xc3\xa9t\xc3\xa9   \n\n x";
    round_trip(b, (const unsigned char *)fixed, sizeof fixed - 1, removes);
    unsigned char *text = malloc(3 * size + 1);
    size_t len = 0;
    if (text) {
        dl_utf8_repair(data, size, text, &len);
        round_trip(b, text, len, removes);
    }
    free(text);
    dl_bpe_free(b);
    return 0;
}
