/* option_table.c: the one parser of the commands' option tables (see
 * option_table.h). */
#include "cli/option_table.h"

#include <stdio.h>
#include <string.h>

#include "core/parse.h"

#define MAX_OPTIONS 192

/* getopt_long over opts (long options only): the next option's code, -1 at
 * the end, '?' after printing what was wrong with an unknown option (with
 * the closest of opts when one is near: "did you mean --lr?"), an ambiguous
 * one, or a missing value, and "Try 'PROG --help'.". */
static int next_option(int argc, char **argv, const struct option *opts, const char *prog)
{
    opterr = 0;
    int prev = optind;
    int opt = getopt_long(argc, argv, ":", opts, NULL);
    if (opt != '?' && opt != ':')
        return opt;
    const char *arg = optind > prev ? argv[optind - 1] : argv[prev];
    if (opt == ':') {
        fprintf(stderr, "%s: option '%s' needs a value\n", prog, arg);
    } else if (strncmp(arg, "--", 2) != 0) {
        fprintf(stderr, "%s: unrecognized option '%s' (options are long: --name)\n", prog, dl_short(arg).s);
    } else {
        char word[128];
        snprintf(word, sizeof word, "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
        const char *names[512];
        int n = 0;
        for (int i = 0; opts[i].name && n < 511; i++)
            names[n++] = opts[i].name;
        names[n] = NULL;
        int prefixed = 0;
        for (int i = 0; i < n; i++)
            prefixed += strncmp(names[i], word, strlen(word)) == 0;
        const char *near = dl_closest_name(word, names);
        if (prefixed > 1)
            fprintf(stderr, "%s: option '--%s' is ambiguous: it begins %d options\n", prog, word, prefixed);
        else if (near)
            fprintf(stderr, "%s: unrecognized option '--%s' (did you mean --%s?)\n", prog, word, near);
        else
            fprintf(stderr, "%s: unrecognized option '--%s'\n", prog, word);
    }
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return '?';
}

/* getopt_long's codes: the shared options keep theirs (options.h), a table's
 * entry i is DL_OPT_FIRST_LOCAL + i (a DL_SHARED one too: apply passes its
 * code on). */
static int long_options(const struct dl_command_line *c, struct option *out)
{
    static const struct option shared[] = {DL_NET_OPTIONS, {0, 0, 0, 0}};
    int n = 0;
    for (int i = 0; c->net && !c->shared_listed && shared[i].name; i++)
        out[n++] = shared[i];
    for (int i = 0; c->options[i].name && n < MAX_OPTIONS - 1; i++)
        out[n++] = (struct option){c->options[i].name, c->options[i].value, 0, DL_OPT_FIRST_LOCAL + i};
    out[n] = (struct option){0, 0, 0, 0};
    return n;
}

/* A bare "-LETTER" word becomes "--NAME" (getopt_long then takes long options only). */
static void letters_to_names(const struct dl_option *options, int argc, char **argv)
{
    static char spelled[MAX_OPTIONS][64];
    for (int i = 0; options[i].name && i < MAX_OPTIONS; i++) {
        if (!options[i].letter)
            continue;
        snprintf(spelled[i], sizeof spelled[i], "--%s", options[i].name);
        for (int a = 1; a < argc; a++)
            if (argv[a][0] == '-' && argv[a][1] == options[i].letter && !argv[a][2])
                argv[a] = spelled[i];
    }
}

/* Sets the field of option o from value; DL_OK or an error in err. */
static int set_field(const struct dl_option *o, void *settings, const char *value, struct dl_error *err)
{
    char name[80];
    snprintf(name, sizeof name, "--%s", o->name);
    void *field = (char *)settings + o->field;
    switch (o->action) {
    case DL_SETS_STRING: *(const char **)field = value; return DL_OK;
    case DL_SETS_FLAG: *(int *)field = (int)o->min; return DL_OK;
    case DL_SETS_INT: return dl_parse_int(name, value, (int)o->min, (int)o->max, field, err);
    case DL_SETS_LONG: return dl_parse_long(name, value, o->min, o->max, field, err);
    case DL_SETS_BYTES: return dl_parse_bytes(name, value, (size_t)o->min, (size_t)o->max, field, err);
    case DL_SETS_DOUBLE: return dl_parse_double(name, value, o->real_min, o->real_max, field, err);
    case DL_SETS_SECONDS: return dl_parse_seconds(name, value, o->real_max, field, err);
    case DL_CALLS: return o->call(settings, value, err);
    default: return dl_errorf(err, DL_ERR_INTERNAL, "%s: not an option that sets a value", name);
    }
}

/* The exit status after a refused option (its message printed). */
static int refused(const struct dl_command_line *c)
{
    if (c->repeat_try)
        fprintf(stderr, "Try '%s --help'.\n", c->prog);
    return 2;
}

/* --help and --version: the status; else -1. */
static int shown(const struct dl_command_line *c, int help)
{
    if (help) {
        c->help();
        return 0;
    }
    if (!c->version)
        return refused(c);
    dl_print_version(c->prog);
    return 0;
}

/* Does entry o of c's table with value; -1 to go on, else the exit status. */
static int apply(const struct dl_command_line *c, const struct dl_option *o, const char *value)
{
    if (o->action == DL_SHOWS_HELP || o->action == DL_SHOWS_VERSION)
        return shown(c, o->action == DL_SHOWS_HELP);
    if (o->action == DL_SHARED)
        return dl_net_option(c->net, o->code, value, c->prog) < 0 ? 2 : -1;
    struct dl_error err = {0};
    if (!set_field(o, c->settings, value, &err))
        return -1;
    if (err.msg[0])
        fprintf(stderr, "%s: %s\n", c->prog, err.msg);
    if (err.msg[0] && c->try_after_bad_value)
        fprintf(stderr, "Try '%s --help'.\n", c->prog);
    return 2;
}

int dl_options_parse(const struct dl_command_line *c, int argc, char **argv, int *first_argument)
{
    struct option longs[MAX_OPTIONS];
    long_options(c, longs);
    letters_to_names(c->options, argc, argv);
    int opt, status = -1;
    optind = 1;
    while (status < 0 && (opt = next_option(argc, argv, longs, c->prog)) != -1) {
        if (opt == '?')
            return refused(c);
        if (opt == DL_OPT_HELP || opt == DL_OPT_VERSION) {
            status = shown(c, opt == DL_OPT_HELP);
            continue;
        }
        if (opt < DL_OPT_FIRST_LOCAL) {
            status = dl_net_option(c->net, opt, optarg, c->prog) < 0 ? 2 : -1;
            continue;
        }
        const struct dl_option *o = &c->options[opt - DL_OPT_FIRST_LOCAL];
        /* an optional value: --NAME=V, or a next word that is no option */
        if (o->value == optional_argument && !optarg && optind < argc && argv[optind][0] != '-')
            optarg = argv[optind++];
        status = apply(c, o, optarg);
    }
    if (first_argument) {
        *first_argument = optind;
    } else if (status < 0 && optind < argc) { /* a command of options only */
        fprintf(stderr, "%s: unexpected argument '%s'%s\n", c->prog, argv[optind],
                c->argument_hint ? c->argument_hint : "");
        status = 2;
    }
    return status;
}
