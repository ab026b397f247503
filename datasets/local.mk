# datasets: one description per dataset (loaded by name: --dataset NAME,
# data: {dataset: NAME}) and the scripts that lay the official archives out,
# installed under $(pkgdatadir)/datasets.
nobase_dist_pkgdata_DATA += \
	datasets/fashion-mnist.yaml \
	datasets/mnist.yaml \
	datasets/cifar10.yaml \
	datasets/cifar100.yaml \
	datasets/imagenet.yaml \
	datasets/imagefolder.yaml
nobase_dist_pkgdata_SCRIPTS += \
	datasets/prepare-imagenet \
	datasets/prepare-cifar \
	datasets/prepare-mnist \
	datasets/prepare-text
EXTRA_DIST += datasets/README.md
