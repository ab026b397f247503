/* tfrecord.h: TFRecord framing, the container of TensorBoard's event files.
 * A record is its data's length (8 bytes, little-endian), the masked CRC-32C
 * of those 8 bytes, the data, and the masked CRC-32C of the data (4 bytes
 * each, little-endian).  Readers check both checksums, so a record cut short
 * by a crash is recognised as such and the records before it are read; a
 * full disk cuts none (dl_tfrecord_append).  CRC-32C (Castagnoli, iSCSI's) is ISA-L's. */
#ifndef DL_TFRECORD_H
#define DL_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of n bytes, as RFC 3720 defines it ("123456789" gives 0xe3069283). */
uint32_t dl_crc32c(const void *data, size_t n);

/* The masked form TFRecord stores: the CRC rotated right by 15 bits plus
 * 0xa282ead8 (so that a CRC over data holding CRCs stays well spread). */
uint32_t dl_tfrecord_mask(uint32_t crc);

/* Appends one record to the file open on fd: rec holds its n bytes of data
 * at rec + 12, with room for the 12 bytes of framing before them and the 4
 * after, which this fills in.  The record goes out whole, or, when a write
 * fails part-way (a full disk), the file is cut back to its length before
 * it, so it always ends on a whole record.  Returns 0, or -1 with errno set
 * by the failed write. */
int dl_tfrecord_append(int fd, unsigned char *rec, size_t n);

#endif
