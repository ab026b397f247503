/* hf_tokenizer.c: Hugging Face's tokenizer.json read into a byte-level BPE
 * (see hf_tokenizer.h). */
#include "data/hf_tokenizer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* GPT-2's bytes_to_unicode, backwards: the byte of each character a
 * byte-level vocabulary writes (U+0000..U+0143), -1 for the others. */
static void byte_of_chars(int byte_of[324])
{
    for (int c = 0; c < 324; c++)
        byte_of[c] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        byte_of[printable ? b : 256 + extra++] = b;
    }
}

struct reader {
    const char *name;
    struct dl_error *err;
    int byte_of[324];
};

static int refuse(const struct reader *r, const char *key, const char *fmt, const char *found)
{
    return dl_errorf(r->err, DL_ERR_DATA, "%s: %s: %s%s%.200s%s", r->name, key, fmt, found ? " (found " : "",
                     found ? found : "", found ? ")" : "");
}

/* s[0..n) (a vocabulary string, UTF-8) in bytes, into out (n bytes at
 * most); the length, or -1 where a character is not one of GPT-2's map. */
static long vocabulary_bytes(const struct reader *r, const char *s, size_t n, unsigned char *out)
{
    long o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        unsigned cp = c;
        if (c >= 0xc0 && c < 0xe0 && i + 1 < n)
            cp = (c & 0x1f) << 6 | ((unsigned char)s[i + 1] & 0x3f), i += 2;
        else if (c < 0x80)
            i++;
        else
            return -1;
        if (cp >= 324 || r->byte_of[cp] < 0)
            return -1;
        out[o++] = (unsigned char)r->byte_of[cp];
    }
    return o;
}

static const char *type_of(const json_t *o)
{
    const char *t = json_string_value(json_object_get(o, "type"));
    return t ? t : "(no type)";
}

/* A key that must be null, false, 0 or "" where given. */
static int must_be_unset(const struct reader *r, const json_t *o, const char *key, const char *where)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v) || json_is_false(v) || (json_is_number(v) && json_number_value(v) == 0) ||
        (json_is_string(v) && json_string_length(v) == 0))
        return DL_OK;
    char k[128];
    snprintf(k, sizeof k, "%s.%s", where, key);
    char *shown = json_dumps(v, JSON_ENCODE_ANY);
    int rc = refuse(r, k, "not supported (dltrain encodes as the library does only without it)", shown);
    free(shown);
    return rc;
}

/* The model's vocabulary: by id, its bytes. */
struct model {
    json_t *vocab;
    long n;
    unsigned char *pool;
    const unsigned char **bytes;
    size_t *len;
    int32_t (*merges)[2];
    long n_merges;
    int ignore_merges;
};

/* The model's vocabulary; its ids run from 0 without gaps but where added
 * tokens (more_ids of them) fill them. */
static int read_vocabulary(const struct reader *r, json_t *vocab, size_t more_ids, struct model *m)
{
    if (!json_is_object(vocab))
        return refuse(r, "model.vocab", "expected an object of token strings and ids", NULL);
    m->vocab = vocab;
    size_t all = 0;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        all += strlen(key);
        if (id < 0 || (size_t)id >= json_object_size(vocab) + more_ids) {
            char k[160];
            snprintf(k, sizeof k, "model.vocab[\"%.100s\"]", key);
            return refuse(r, k, "expected an id from 0 up, without gaps", NULL);
        }
        m->n = id >= m->n ? (long)id + 1 : m->n;
    }
    m->pool = malloc(all + 1);
    m->bytes = calloc((size_t)m->n + 1, sizeof *m->bytes);
    m->len = calloc((size_t)m->n + 1, sizeof *m->len);
    if (!m->pool || !m->bytes || !m->len)
        return dl_errorf(r->err, DL_ERR_NOMEM, "%s: out of memory for %ld tokens", r->name, m->n);
    size_t used = 0;
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_integer_value(v);
        char k[160];
        snprintf(k, sizeof k, "model.vocab[\"%.100s\"]", key);
        if (m->bytes[id])
            return refuse(r, k, "an id that another token has", NULL);
        long got = vocabulary_bytes(r, key, strlen(key), m->pool + used);
        if (got <= 0)
            return refuse(r, k, "expected a byte-level token (characters of GPT-2's byte map)", NULL);
        m->bytes[id] = m->pool + used, m->len[id] = (size_t)got;
        used += (size_t)got;
    }
    return DL_OK;
}

static int32_t token_id(const struct model *m, const char *s, size_t n)
{
    json_t *v = json_object_getn(m->vocab, s, n);
    return json_is_integer(v) ? (int32_t)json_integer_value(v) : -1;
}

static int read_merges(const struct reader *r, const json_t *merges, struct model *m)
{
    if (!json_is_array(merges))
        return refuse(r, "model.merges", "expected an array", NULL);
    m->n_merges = (long)json_array_size(merges);
    m->merges = malloc(sizeof *m->merges * (size_t)(m->n_merges + 1));
    if (!m->merges)
        return dl_errorf(r->err, DL_ERR_NOMEM, "%s: out of memory for %ld merges", r->name, m->n_merges);
    for (long i = 0; i < m->n_merges; i++) {
        const json_t *e = json_array_get(merges, (size_t)i);
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if (json_is_string(e)) { /* "a b" */
            const char *s = json_string_value(e), *space = strchr(s, ' ');
            if (space && !strchr(space + 1, ' '))
                a = s, la = (size_t)(space - s), b = space + 1, lb = strlen(b);
        } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
                   json_is_string(json_array_get(e, 1))) { /* ["a", "b"] */
            a = json_string_value(json_array_get(e, 0)), la = json_string_length(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1)), lb = json_string_length(json_array_get(e, 1));
        }
        char k[64];
        snprintf(k, sizeof k, "model.merges[%ld]", i);
        if (!a)
            return refuse(r, k, "expected \"A B\" or [\"A\", \"B\"]", NULL);
        int32_t left = token_id(m, a, la), right = token_id(m, b, lb);
        if (left < 0 || right < 0)
            return dl_errorf(r->err, DL_ERR_DATA, "%s: %s: '%.*s' is not in the vocabulary", r->name, k,
                             (int)(left < 0 ? (la > 100 ? 100 : la) : (lb > 100 ? 100 : lb)), left < 0 ? a : b);
        m->merges[i][0] = left, m->merges[i][1] = right;
    }
    return DL_OK;
}

static int read_model(const struct reader *r, const json_t *model, size_t more_ids, struct model *m)
{
    if (!json_is_object(model))
        return refuse(r, "model", "expected an object", NULL);
    const char *type = json_string_value(json_object_get(model, "type"));
    if (type && strcmp(type, "BPE") != 0)
        return refuse(r, "model.type", "expected BPE (a byte-level BPE)", type);
    int rc = must_be_unset(r, model, "dropout", "model");
    if (!rc)
        rc = must_be_unset(r, model, "continuing_subword_prefix", "model");
    if (!rc)
        rc = must_be_unset(r, model, "end_of_word_suffix", "model");
    if (!rc)
        rc = read_vocabulary(r, json_object_get(model, "vocab"), more_ids, m);
    if (!rc)
        rc = read_merges(r, json_object_get(model, "merges"), m);
    m->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    return rc;
}

static int read_added(const struct reader *r, const json_t *added, struct dl_bpe_added **out, int *n)
{
    *n = 0;
    if (!added || json_is_null(added))
        return DL_OK;
    if (!json_is_array(added))
        return refuse(r, "added_tokens", "expected an array", NULL);
    *out = calloc(json_array_size(added) + 1, sizeof **out);
    if (!*out)
        return dl_errorf(r->err, DL_ERR_NOMEM, "%s: out of memory", r->name);
    size_t i;
    const json_t *a;
    json_array_foreach(added, i, a)
    {
        char k[64];
        snprintf(k, sizeof k, "added_tokens[%zu]", i);
        const json_t *content = json_object_get(a, "content"), *id = json_object_get(a, "id");
        if (!json_is_string(content) || json_string_length(content) == 0 || !json_is_integer(id) ||
            json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            return refuse(r, k, "expected {\"id\": ID, \"content\": TEXT, ...}", NULL);
        int rc = must_be_unset(r, a, "single_word", k);
        if (!rc)
            rc = must_be_unset(r, a, "lstrip", k);
        if (!rc)
            rc = must_be_unset(r, a, "rstrip", k);
        if (rc)
            return rc;
        (*out)[(*n)++] = (struct dl_bpe_added){(int32_t)json_integer_value(id), json_string_value(content),
                                               json_string_length(content),
                                               json_is_true(json_object_get(a, "normalized"))};
    }
    return DL_OK;
}

/* One pre-tokenizer; *byte_level counts ByteLevel ones. */
static int read_pre_step(const struct reader *r, const json_t *p, const char *key, struct dl_pretokenizer *pre,
                         int *byte_level)
{
    const char *type = type_of(p);
    char k[96];
    if (strcmp(type, "ByteLevel") == 0) {
        ++*byte_level;
        int rc = must_be_unset(r, p, "add_prefix_space", key);
        const json_t *use = json_object_get(p, "use_regex");
        if (!rc && (!use || json_is_true(use))) /* the library's default: GPT-2's pattern */
            rc = dl_pretokenizer_add(pre, dl_pretokenize_gpt2_pattern, 0, DL_SPLIT_ISOLATED, 0, r->err);
        return rc;
    }
    if (strcmp(type, "Digits") == 0)
        return dl_pretokenizer_add(pre, "\\p{N}", 0,
                                   json_is_true(json_object_get(p, "individual_digits")) ? DL_SPLIT_ISOLATED
                                                                                           : DL_SPLIT_CONTIGUOUS,
                                   0, r->err);
    if (strcmp(type, "Split") != 0) {
        snprintf(k, sizeof k, "%s.type", key);
        return refuse(r, k, "expected ByteLevel, Split, Digits or a Sequence of them", type);
    }
    static const char *const behaviors[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                            "Contiguous"};
    static const enum dl_split_behavior behavior_of[] = {DL_SPLIT_ISOLATED, DL_SPLIT_REMOVED,
                                                         DL_SPLIT_MERGED_WITH_PREVIOUS, DL_SPLIT_MERGED_WITH_NEXT,
                                                         DL_SPLIT_CONTIGUOUS};
    const char *behavior = json_string_value(json_object_get(p, "behavior"));
    int b = 0;
    while (b < 5 && (!behavior || strcmp(behavior, behaviors[b]) != 0))
        b++;
    const json_t *pattern = json_object_get(p, "pattern");
    const char *regex = json_string_value(json_object_get(pattern, "Regex"));
    const char *literal = json_string_value(json_object_get(pattern, "String"));
    if (b == 5) {
        snprintf(k, sizeof k, "%s.behavior", key);
        return refuse(r, k, "expected Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous", behavior);
    }
    if (!regex && !literal) {
        snprintf(k, sizeof k, "%s.pattern", key);
        return refuse(r, k, "expected {\"Regex\": PATTERN} or {\"String\": TEXT}", NULL);
    }
    int rc = dl_pretokenizer_add(pre, regex ? regex : literal, !regex, behavior_of[b],
                                 json_is_true(json_object_get(p, "invert")), r->err);
    if (rc)
        dl_error_prefix(r->err, "%s: %s", r->name, key);
    return rc;
}

static int read_pre_tokenizer(const struct reader *r, const json_t *p, struct dl_pretokenizer *pre)
{
    int byte_level = 0, rc = DL_OK;
    if (json_is_object(p) && strcmp(type_of(p), "Sequence") == 0) {
        const json_t *steps = json_object_get(p, "pretokenizers");
        size_t i;
        const json_t *step;
        if (!json_is_array(steps))
            return refuse(r, "pre_tokenizer.pretokenizers", "expected an array", NULL);
        json_array_foreach(steps, i, step)
        {
            char k[64];
            snprintf(k, sizeof k, "pre_tokenizer.pretokenizers[%zu]", i);
            if (!rc)
                rc = read_pre_step(r, step, k, pre, &byte_level);
        }
    } else if (json_is_object(p))
        rc = read_pre_step(r, p, "pre_tokenizer", pre, &byte_level);
    if (!rc && byte_level != 1)
        rc = refuse(r, "pre_tokenizer", "expected one ByteLevel pre-tokenizer (a byte-level BPE)",
                    byte_level ? "several" : "none");
    return rc;
}

/* The ids of TemplateProcessing's `single` before and after its sequence. */
static int read_template(const struct reader *r, const json_t *t, const char *key, int32_t *prefix, int *n_prefix,
                         int32_t *suffix, int *n_suffix)
{
    const json_t *single = json_object_get(t, "single"), *specials = json_object_get(t, "special_tokens");
    char k[128];
    snprintf(k, sizeof k, "%s.single", key);
    if (!json_is_array(single))
        return refuse(r, k, "expected an array", NULL);
    int seen_sequence = 0;
    size_t i;
    const json_t *piece;
    json_array_foreach(single, i, piece)
    {
        const json_t *special = json_object_get(piece, "SpecialToken");
        if (json_object_get(piece, "Sequence")) {
            seen_sequence = 1;
            continue;
        }
        const char *name = json_string_value(json_object_get(special, "id"));
        const json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
        snprintf(k, sizeof k, "%s.single[%zu]", key, i);
        if (!name || !json_is_array(ids))
            return refuse(r, k, "expected a SpecialToken of special_tokens or the Sequence", NULL);
        size_t j;
        const json_t *id;
        json_array_foreach(ids, j, id)
        {
            int32_t *to = seen_sequence ? suffix : prefix;
            int *n = seen_sequence ? n_suffix : n_prefix;
            if (*n == 16)
                return refuse(r, k, "more than 16 tokens around a text", NULL);
            if (!json_is_integer(id))
                return refuse(r, k, "expected integer ids", NULL);
            to[(*n)++] = (int32_t)json_integer_value(id);
        }
    }
    return DL_OK;
}

static int read_post_processor(const struct reader *r, const json_t *p, int32_t *prefix, int *n_prefix,
                               int32_t *suffix, int *n_suffix)
{
    if (!p || json_is_null(p))
        return DL_OK;
    const json_t *list = p;
    int sequence = strcmp(type_of(p), "Sequence") == 0;
    if (sequence)
        list = json_object_get(p, "processors");
    for (size_t i = 0; i < (sequence ? json_array_size(list) : 1); i++) {
        const json_t *one = sequence ? json_array_get(list, i) : p;
        char k[64];
        snprintf(k, sizeof k, sequence ? "post_processor.processors[%zu]" : "post_processor", i);
        if (strcmp(type_of(one), "TemplateProcessing") == 0) {
            int rc = read_template(r, one, k, prefix, n_prefix, suffix, n_suffix);
            if (rc)
                return rc;
        } else if (strcmp(type_of(one), "ByteLevel") != 0) /* ByteLevel's trims only offsets */
            return refuse(r, k, "expected ByteLevel or TemplateProcessing (or a Sequence of them)", type_of(one));
    }
    return DL_OK;
}

static int read_tokenizer(const struct reader *r, const json_t *root, struct dl_bpe **out)
{
    if (!json_is_object(root))
        return refuse(r, "the file", "expected a JSON object (a tokenizer.json)", NULL);
    const json_t *normalizer = json_object_get(root, "normalizer"), *decoder = json_object_get(root, "decoder");
    if (normalizer && !json_is_null(normalizer))
        return refuse(r, "normalizer", "not supported (null expected)", type_of(normalizer));
    if (decoder && !json_is_null(decoder) && strcmp(type_of(decoder), "ByteLevel") != 0)
        return refuse(r, "decoder", "expected ByteLevel (a byte-level BPE)", type_of(decoder));
    struct model m = {0};
    struct dl_bpe_added *added = NULL;
    int n_added = 0, n_prefix = 0, n_suffix = 0;
    int32_t prefix[16], suffix[16];
    struct dl_pretokenizer *pre = dl_pretokenizer_new();
    int rc = pre ? DL_OK : dl_errorf(r->err, DL_ERR_NOMEM, "%s: out of memory", r->name);
    if (!rc)
        rc = read_model(r, json_object_get(root, "model"), json_array_size(json_object_get(root, "added_tokens")),
                        &m);
    if (!rc)
        rc = read_added(r, json_object_get(root, "added_tokens"), &added, &n_added);
    if (!rc)
        rc = read_pre_tokenizer(r, json_object_get(root, "pre_tokenizer"), pre);
    if (!rc)
        rc = read_post_processor(r, json_object_get(root, "post_processor"), prefix, &n_prefix, suffix, &n_suffix);
    int32_t separator = -1;
    for (int i = 0; !rc && i < n_added && n_prefix + n_suffix == 0; i++)
        if (added[i].len == 13 && memcmp(added[i].content, "<|endoftext|>", 13) == 0)
            separator = added[i].id;
    if (!rc) {
        struct dl_bpe_recipe recipe = {.name = r->name, .n = (int32_t)m.n, .bytes = m.bytes, .len = m.len,
                                       .merges = (const int32_t(*)[2])m.merges, .n_merges = m.n_merges,
                                       .whole_first = m.ignore_merges, .pre = pre, .added = added,
                                       .n_added = n_added, .match_added = 1, .prefix = prefix,
                                       .suffix = suffix, .n_prefix = n_prefix, .n_suffix = n_suffix,
                                       .separator = separator};
        pre = NULL; /* dl_bpe_build takes it */
        rc = dl_bpe_build(&recipe, out, r->err);
    }
    dl_pretokenizer_free(pre);
    free(m.pool);
    free(m.bytes);
    free(m.len);
    free(m.merges);
    free(added);
    return rc;
}

static int load(const char *name, json_t *root, const json_error_t *je, struct dl_bpe **out, struct dl_error *err)
{
    *out = NULL;
    if (!root)
        return dl_errorf(err, DL_ERR_DATA, "%s:%d:%d: %s", name, je->line, je->column, je->text);
    struct reader r = {name, err, {0}};
    byte_of_chars(r.byte_of);
    int rc = read_tokenizer(&r, root, out);
    json_decref(root);
    return rc;
}

int dl_hf_tokenizer_load(const char *path, struct dl_bpe **out, struct dl_error *err)
{
    json_error_t je;
    return load(path, json_load_file(path, JSON_REJECT_DUPLICATES, &je), &je, out, err);
}

int dl_hf_tokenizer_parse(const char *name, const char *json, size_t len, struct dl_bpe **out, struct dl_error *err)
{
    json_error_t je;
    return load(name, json_loadb(json, len, JSON_REJECT_DUPLICATES, &je), &je, out, err);
}
