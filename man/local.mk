# man pages: the command (section 1), the network-file and dataset-file
# formats (section 5).
# The LAYER TYPES section of dltrain-net.5 is generated from the op kinds'
# attribute tables: after changing one, run
#   tools/gen-layer-doc ./dltrain $(srcdir)/man/dltrain-net.5
# (tests/test_nets.sh fails while the page is out of date).
dist_man_MANS += man/dltrain.1 man/dltrain-net.5 man/dltrain-data.5
EXTRA_DIST += tools/gen-layer-doc
