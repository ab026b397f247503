# src/spec: YAML with locations, the layer-attribute schema, network files,
# the dataset schema (data: sections and datasets/NAME.yaml).
DL_COMMON_SOURCES += \
	src/spec/yaml.c src/spec/yaml.h \
	src/spec/datafile.c src/spec/datafile.h \
	src/spec/netspec.h
DL_REAL_SOURCES += \
	src/spec/attrs.c src/spec/attrs.h \
	src/spec/netfile.c src/spec/netfile.h src/spec/expand.c src/spec/expand.h
