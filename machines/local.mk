# machines: example machine files for `dltrain plan --machine`, installed
# under $(pkgdatadir)/machines.
nobase_dist_pkgdata_DATA += \
	machines/v100-25gbit.yaml \
	machines/vm-2core.yaml
