# tests/nets.mk: the shipped network files pass `dltrain check` with the
# reference parameter counts and torchvision's layer names (tests/test_nets.sh).
TESTS += tests/test_nets.sh
EXTRA_DIST += tests/test_nets.sh
