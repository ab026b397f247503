#!/bin/sh
# test_images.sh: runs tests/test_images.py (image decoding, transforms and
# the decode pipeline against PIL and torchvision) with the Python that has
# numpy, PIL and torch.
exec /usr/bin/python3 "$top_srcdir/tests/test_images.py"
