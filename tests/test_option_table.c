/* test_option_table.c: cli/option_table.h's parser: every action sets its
 * field (string, int, long, size, double, seconds, a flag to its value, a
 * handler), a bad value or an unknown option is status 2 with the field
 * untouched, an optional value takes the next word that is no option, a
 * bare -LETTER stands for its option, --help and --version are status 0
 * (--version refused where the command has none), the shared options reach
 * dl_net_option (only those the table lists, with shared_listed), the
 * positional arguments begin where it says, and a command of options only
 * (no first_argument) refuses one with status 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cli/option_table.h"

struct settings {
    const char *name, *resumed, *out;
    int count, on, off, resume, handled;
    long steps;
    size_t bytes;
    double rate, wait;
};

static int handle(void *settings, const char *value, struct dl_error *err)
{
    if (strcmp(value, "bad") == 0)
        return dl_errorf(err, DL_ERR_SPEC, "--handled: bad");
    ((struct settings *)settings)->handled = 1;
    return DL_OK;
}

static int take_resume(void *settings, const char *value, struct dl_error *err)
{
    (void)err;
    struct settings *s = settings;
    s->resume = 1;
    s->resumed = value;
    return DL_OK;
}

static const struct dl_option options[] = {
    DL_OPTION_STRING("name", struct settings, name),
    DL_OPTION_INT("count", struct settings, count, 1, 10),
    DL_OPTION_LONG("steps", struct settings, steps, 0, 1L << 40),
    DL_OPTION_BYTES("bytes", struct settings, bytes, 1, (size_t)1 << 40),
    DL_OPTION_DOUBLE("rate", struct settings, rate, 0, 1),
    DL_OPTION_SECONDS("wait", struct settings, wait, 1e4),
    DL_OPTION_FLAG("on", struct settings, on, 1),
    DL_OPTION_FLAG("no-off", struct settings, off, 0),
    DL_OPTION_CALL("handled", required_argument, handle),
    DL_OPTION_CALL("resume", optional_argument, take_resume),
    DL_OPTION_OUTPUT(struct settings, out),
    DL_OPTION_END};

static int helped;

static void help(void)
{
    helped++;
}

/* Parses the words (argv[0] "prog") into s; the status, *first the first positional
 * (first NULL: options only). */
static int parse(struct settings *s, struct dl_net_options *net, int *first, int n, ...)
{
    static char words[16][64];
    char *argv[17] = {"prog"};
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        snprintf(words[i], sizeof words[i], "%s", va_arg(ap, const char *));
        argv[i + 1] = words[i];
    }
    va_end(ap);
    *s = (struct settings){.off = 1};
    struct dl_command_line line = {"prog", options, s, net, help, .version = 0};
    return dl_options_parse(&line, n + 1, argv, first);
}

static void fields_set(void **state)
{
    (void)state;
    struct settings s;
    int first;
    assert_int_equal(parse(&s, NULL, &first, 13, "--name", "x", "--count=3", "--steps", "7", "--bytes", "2K",
                           "--rate", "0.5", "--wait", "2m", "--on", "--no-off"), -1);
    assert_string_equal(s.name, "x");
    assert_int_equal(s.count, 3);
    assert_int_equal(s.steps, 7);
    assert_int_equal(s.bytes, 2048);
    assert_true(s.rate == 0.5 && s.wait == 120);
    assert_int_equal(s.on, 1);
    assert_int_equal(s.off, 0);
    assert_int_equal(first, 14);
    assert_int_equal(parse(&s, NULL, &first, 4, "--handled", "yes", "a", "b"), -1);
    assert_int_equal(s.handled, 1);
    assert_int_equal(first, 3);
}

static void refusals(void **state)
{
    (void)state;
    struct settings s;
    int first;
    assert_int_equal(parse(&s, NULL, &first, 2, "--count", "11"), 2);
    assert_int_equal(s.count, 0);
    assert_int_equal(parse(&s, NULL, &first, 2, "--rate", "x"), 2);
    assert_int_equal(parse(&s, NULL, &first, 2, "--handled", "bad"), 2);
    assert_int_equal(s.handled, 0);
    assert_int_equal(parse(&s, NULL, &first, 1, "--bogus"), 2);
    assert_int_equal(parse(&s, NULL, &first, 1, "--count"), 2);
    assert_int_equal(parse(&s, NULL, &first, 1, "--version"), 2); /* not one of this command's */
}

static void optional_value_and_letter(void **state)
{
    (void)state;
    struct settings s;
    int first;
    assert_int_equal(parse(&s, NULL, &first, 3, "--resume", "ckpt", "-o"), 2); /* -o lacks its value */
    assert_int_equal(parse(&s, NULL, &first, 4, "--resume", "ckpt", "-o", "f"), -1);
    assert_int_equal(s.resume, 1);
    assert_string_equal(s.resumed, "ckpt");
    assert_string_equal(s.out, "f");
    assert_int_equal(parse(&s, NULL, &first, 2, "--resume", "--on"), -1);
    assert_true(s.resume == 1 && s.resumed == NULL && s.on == 1);
    assert_int_equal(parse(&s, NULL, &first, 1, "--resume=dir"), -1);
    assert_string_equal(s.resumed, "dir");
}

static void help_and_shared(void **state)
{
    (void)state;
    struct settings s;
    struct dl_net_options net;
    int first;
    helped = 0;
    dl_net_options_init(&net);
    assert_int_equal(parse(&s, &net, &first, 2, "--help", "--count=100"), 0);
    assert_int_equal(helped, 1);
    assert_int_equal(parse(&s, &net, &first, 5, "--threads", "3", "--lr", "0.1", "--on"), -1);
    assert_int_equal(net.threads, 3);
    assert_true(net.n == 1 && net.codes[0] == DL_OPT_LR && strcmp(net.values[0], "0.1") == 0);
    assert_int_equal(s.on, 1);
    assert_int_equal(parse(&s, &net, &first, 2, "--threads", "0"), 2);
}

/* A command taking only the shared options its table lists (bench conv). */
static void listed_shared(void **state)
{
    (void)state;
    static const struct dl_option listed[] = {DL_OPTION_SHARED("threads", required_argument, DL_OPT_THREADS),
                                              DL_OPTION_FLAG("on", struct settings, on, 1), DL_OPTION_END};
    struct settings s = {0};
    struct dl_net_options net;
    dl_net_options_init(&net);
    struct dl_command_line line = {"prog", listed, &s, &net, help, .shared_listed = 1};
    int first;
    char w0[] = "prog", w1[] = "--threads", w2[] = "3", w3[] = "--on", w4[] = "--lr", w5[] = "0.1";
    char *argv[] = {w0, w1, w2, w3, NULL};
    assert_int_equal(dl_options_parse(&line, 4, argv, &first), -1);
    assert_true(net.threads == 3 && s.on == 1 && first == 4);
    char *unlisted[] = {w0, w4, w5, NULL};
    assert_int_equal(dl_options_parse(&line, 3, unlisted, &first), 2); /* --lr: not one of the table's */
    assert_int_equal(net.n, 0);
}

static void options_only(void **state)
{
    (void)state;
    struct settings s;
    int first;
    assert_int_equal(parse(&s, NULL, &first, 2, "--on", "x"), -1); /* x: the command's to take */
    assert_int_equal(parse(&s, NULL, NULL, 1, "--on"), -1);
    assert_int_equal(s.on, 1);
    assert_int_equal(parse(&s, NULL, NULL, 2, "--on", "x"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(fields_set), cmocka_unit_test(refusals),
                                       cmocka_unit_test(optional_value_and_letter), cmocka_unit_test(help_and_shared),
                                       cmocka_unit_test(listed_shared), cmocka_unit_test(options_only)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
