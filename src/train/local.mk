# src/train: the training loop.
libdltrain_a_SOURCES += src/train/trainer.c src/train/trainer.h \
	src/train/trainer_impl.h src/train/trainer_setup.c src/train/trainer_grid.c \
	src/train/trainer_trace.c src/train/trainer_eval.c src/train/trainer_checkpoints.c \
	src/train/trainer_epochs.c src/train/trainer_serve.c src/train/step_guard.c src/train/step_guard.h \
	src/train/batch_ahead.c src/train/batch_ahead.h \
	src/train/no_decay.c src/train/no_decay.h src/train/param_spans.c src/train/param_spans.h \
	src/train/tied.c src/train/tied.h \
	src/train/hf_weights.c src/train/hf_weights.h src/train/hf_llama_config.c src/train/hf_llama_config.h \
	src/train/sample.c src/train/sample.h \
	src/train/precision_auto.c src/train/precision_auto.h
# Checkpoints (run state <-> safetensors, folder discovery and rotation),
# signal flags for preemption, and NaN/Inf location.
libdltrain_a_SOURCES += src/train/checkpoint.c src/train/checkpoint.h \
	src/train/checkpoint_dir.c src/train/checkpoint_dir.h \
	src/train/checkpoint_grid.c src/train/checkpoint_grid.h \
	src/train/numerics.c src/train/pipeline.c src/train/pipeline.h src/train/numerics.h \
	src/train/signals.c src/train/signals.h
