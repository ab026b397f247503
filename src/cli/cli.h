/* cli.h: entry points of the subcommands (one file each in src/cli/). */
#ifndef DL_CLI_H
#define DL_CLI_H

int dl_cli_main(int argc, char **argv);

/* One function per subcommand; argv[0] is the subcommand's name. */
int dl_cli_train(int argc, char **argv);
int dl_cli_check(int argc, char **argv);
int dl_cli_bench(int argc, char **argv);
int dl_cli_bench_comm(int argc, char **argv); /* comm/ benchmark: bench_comm.c */
int dl_cli_bench_step(int argc, char **argv); /* training-step benchmark: bench_step.c */
int dl_cli_bench_data(int argc, char **argv); /* input pipeline benchmark: bench_data.c */
int dl_cli_bench_pipeline(int argc, char **argv); /* pipeline schedules simulated on measured times: bench_pipeline.c */
int dl_cli_help(int argc, char **argv);
int dl_cli_tokenize(int argc, char **argv);   /* text to llm.c token files: tokenize.c */
int dl_cli_generate(int argc, char **argv);   /* text sampled from a trained network: generate.c */
int dl_cli_export(int argc, char **argv);     /* weights in Hugging Face's GPT-2 layout: export.c */
int dl_cli_plot(int argc, char **argv);       /* charts of --metrics runs: plot.c */
int dl_cli_tune(int argc, char **argv);       /* tuner: tune.c */
int dl_cli_plan(int argc, char **argv);       /* layouts predicted and ranked: plan.c */
int dl_cli_bench_conv(int argc, char **argv); /* convolution suites under the tuner: bench_conv.c */

#endif
