# tests/nets.mk: the shipped network files pass `dltrain check` with the
# reference parameter counts and torchvision's layer names (tests/test_nets.sh),
# and one training step of each gives PyTorch's gradients, running statistics
# and evaluation logits (tests/test_torch.sh, through tests/torch_step, which
# also takes the optimizers' steps that tests/test_layerwise.sh compares).
TESTS += tests/test_nets.sh tests/test_torch.sh
EXTRA_DIST += tests/test_nets.sh tests/test_torch.sh tests/torch_check.py

check_PROGRAMS += tests/torch_step
tests_torch_step_SOURCES = tests/torch_step.c
tests_torch_step_LDADD = libdltrain.a $(DL_LIBS)
