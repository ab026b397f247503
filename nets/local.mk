# nets: the shipped network files, installed under $(pkgdatadir)/nets.
nobase_dist_pkgdata_DATA += \
	nets/lenet5.yaml \
	nets/mlp.yaml \
	nets/alexnet.yaml \
	nets/vgg16.yaml \
	nets/resnet18.yaml \
	nets/resnet50.yaml \
	nets/bigram.yaml \
	nets/gpt-tiny.yaml \
	nets/char-lstm.yaml \
	nets/gpt2.yaml \
	nets/gpt2-medium.yaml \
	nets/llama-tiny.yaml \
	nets/smollm2-135m.yaml \
	nets/llama3.2-1b.yaml
