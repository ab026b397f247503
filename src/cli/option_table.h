/* option_table.h: a command's options declared as a table (long name, the
 * bare "-LETTER" standing for it, whether it takes a value, and what it
 * does: set a field of the command's settings, set a flag, call a
 * handler, or hand the value to the shared network options of options.h),
 * and the one parser every command runs them through.  The parser reports
 * unknown options, missing values and bad values in the commands' words
 * ("PROG: --steps: expected ...", "Try 'PROG --help'.") and hands back
 * where the positional arguments begin. */
#ifndef DL_CLI_OPTION_TABLE_H
#define DL_CLI_OPTION_TABLE_H

#include <getopt.h>
#include <stddef.h>

#include "cli/options.h"
#include "core/error.h"

enum dl_option_action {
    DL_SETS_STRING,  /* const char *field = the value */
    DL_SETS_INT,     /* int field, dl_parse_int within [min, max] */
    DL_SETS_LONG,    /* long field, dl_parse_long within [min, max] */
    DL_SETS_BYTES,   /* size_t field, dl_parse_bytes within [min, max] */
    DL_SETS_DOUBLE,  /* double field, dl_parse_double within [real_min, real_max] */
    DL_SETS_SECONDS, /* double field, dl_parse_seconds up to real_max */
    DL_SETS_FLAG,    /* int field = min (the option takes no value) */
    DL_CALLS,        /* call(settings, value, err) */
    DL_SHARED,       /* options.h's shared option code (dl_net_option) */
    DL_SHOWS_HELP,   /* the command's help, exit status 0 */
    DL_SHOWS_VERSION /* dl_print_version, exit status 0 */
};

/* A handler: DL_OK, or an error in err that the parser prints as
 * "PROG: message" (a handler that printed its own message leaves err's
 * message empty).  Either way the command exits with status 2. */
typedef int (*dl_option_handler)(void *settings, const char *value, struct dl_error *err);

struct dl_option {
    const char *name;              /* --NAME */
    char letter;                   /* a bare "-LETTER" word means --NAME (0: none) */
    int value;                     /* no_argument, required_argument, or optional_argument: --NAME=V or a
                                      next word that is no option */
    enum dl_option_action action;
    size_t field;                  /* offsetof the field in the command's settings */
    long min, max;                 /* DL_SETS_INT, _LONG, _BYTES; DL_SETS_FLAG: the value set */
    double real_min, real_max;     /* DL_SETS_DOUBLE, DL_SETS_SECONDS */
    dl_option_handler call;        /* DL_CALLS */
    int code;                      /* DL_SHARED: the DL_OPT_* code */
};

#define DL_OPTION_STRING(NAME, TYPE, FIELD) \
    {.name = NAME, .value = required_argument, .action = DL_SETS_STRING, .field = offsetof(TYPE, FIELD)}
/* --output FILE, which a bare -o stands for too (tokenize, export, plot). */
#define DL_OPTION_OUTPUT(TYPE, FIELD) \
    {.name = "output", .letter = 'o', .value = required_argument, .action = DL_SETS_STRING, \
     .field = offsetof(TYPE, FIELD)}
#define DL_OPTION_INT(NAME, TYPE, FIELD, MIN, MAX) \
    {.name = NAME, .value = required_argument, .action = DL_SETS_INT, .field = offsetof(TYPE, FIELD), \
     .min = (MIN), .max = (MAX)}
#define DL_OPTION_LONG(NAME, TYPE, FIELD, MIN, MAX) \
    {.name = NAME, .value = required_argument, .action = DL_SETS_LONG, .field = offsetof(TYPE, FIELD), \
     .min = (MIN), .max = (MAX)}
#define DL_OPTION_BYTES(NAME, TYPE, FIELD, MIN, MAX) \
    {.name = NAME, .value = required_argument, .action = DL_SETS_BYTES, .field = offsetof(TYPE, FIELD), \
     .min = (long)(MIN), .max = (long)(MAX)}
#define DL_OPTION_DOUBLE(NAME, TYPE, FIELD, MIN, MAX) \
    {.name = NAME, .value = required_argument, .action = DL_SETS_DOUBLE, .field = offsetof(TYPE, FIELD), \
     .real_min = (MIN), .real_max = (MAX)}
#define DL_OPTION_SECONDS(NAME, TYPE, FIELD, MAX) \
    {.name = NAME, .value = required_argument, .action = DL_SETS_SECONDS, .field = offsetof(TYPE, FIELD), \
     .real_max = (MAX)}
#define DL_OPTION_FLAG(NAME, TYPE, FIELD, SET_TO) \
    {.name = NAME, .value = no_argument, .action = DL_SETS_FLAG, .field = offsetof(TYPE, FIELD), .min = (SET_TO)}
#define DL_OPTION_CALL(NAME, VALUE, HANDLER) {.name = NAME, .value = (VALUE), .action = DL_CALLS, .call = (HANDLER)}
#define DL_OPTION_SHARED(NAME, VALUE, CODE) {.name = NAME, .value = (VALUE), .action = DL_SHARED, .code = (CODE)}
#define DL_OPTION_HELP {.name = "help", .value = no_argument, .action = DL_SHOWS_HELP}
#define DL_OPTION_VERSION {.name = "version", .value = no_argument, .action = DL_SHOWS_VERSION}
#define DL_OPTION_END {.name = NULL}

/* A command's whole command line. */
struct dl_command_line {
    const char *prog;                /* "dltrain tune": the messages' first word */
    const struct dl_option *options; /* the command's own, ended by DL_OPTION_END */
    void *settings;                  /* where their fields are */
    struct dl_net_options *net;      /* where the shared options (options.h) go: every one of
                                        DL_NET_OPTIONS before the table's, or with shared_listed only the
                                        table's DL_SHARED ones; NULL: none */
    void (*help)(void);              /* --help */
    int version;                     /* --version prints the version (else it is refused: status 2) */
    int repeat_try;                  /* a refused option prints "Try 'PROG --help'." once more */
    int try_after_bad_value;         /* a bad value is followed by "Try 'PROG --help'." */
    int shared_listed;               /* net takes only the shared options the table lists (DL_SHARED) */
    const char *argument_hint;       /* after "unexpected argument 'X'" (NULL: nothing) */
};

/* Parses argv's options (from argv[1]) by c's tables.  Returns -1 to go on,
 * with *first_argument the index in argv of the first positional argument
 * (argc when none); else the exit status: 0 after --help or --version, 2
 * after the message on an unknown option, a missing value or a bad one.
 * first_argument NULL: the command takes options only, and a positional
 * argument is refused ("PROG: unexpected argument 'X'", then
 * c->argument_hint; status 2). */
int dl_options_parse(const struct dl_command_line *c, int argc, char **argv, int *first_argument);

#endif
