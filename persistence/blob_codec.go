package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Blob codecs: how a blob's bytes are stored.
const (
	codecRaw  byte = 0
	codecZstd byte = 1
	codecS2   byte = 2
)

const blobVersion byte = 1

// Compression selects the blob codec policy.
type Compression int

const (
	// CompressZstd stores a blob zstd-compressed when that is smaller.
	CompressZstd Compression = iota
	// CompressNone always stores blobs raw.
	CompressNone
	// CompressS2 stores a blob S2-compressed when that is smaller: about
	// four times faster than zstd both ways, about a third larger on text.
	CompressS2
)

var (
	zstdEncoder *zstd.Encoder
	zstdDecoder *zstd.Decoder
	zstdOnce    sync.Once
)

func zstdCodecs() (*zstd.Encoder, *zstd.Decoder) {
	zstdOnce.Do(func() {
		var err error
		// EncodeAll and DecodeAll are safe for concurrent use; each keeps
		// GOMAXPROCS coders, so callers compress in parallel.
		zstdEncoder, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithZeroFrames(true))
		if err != nil {
			panic(err) // only bad options fail here
		}
		zstdDecoder, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(1<<31)) // above any payload limit
		if err != nil {
			panic(err)
		}
	})
	return zstdEncoder, zstdDecoder
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeBlob returns the stored record of payload p:
//
//	version u8 | codec u8 | raw_len uvarint | stored bytes | crc32c u32
//
// The stored length is what lies between the header and the checksum, a
// CRC-32C (big-endian) of everything before it. zstd frames also carry a
// checksum of the decompressed content, which the decoder verifies.
func EncodeBlob(p []byte, c Compression) []byte {
	hdr := make([]byte, 2, 2+binary.MaxVarintLen64+len(p)+4)
	hdr[0] = blobVersion
	hdr[1] = codecRaw
	hdr = binary.AppendUvarint(hdr, uint64(len(p)))
	out := hdr
	if len(p) >= 64 {
		switch c {
		case CompressZstd:
			enc, _ := zstdCodecs()
			if z := enc.EncodeAll(p, hdr); len(z)-len(hdr) < len(p) {
				z[1] = codecZstd
				out = z
			}
		case CompressS2:
			z := s2.Encode(nil, p)
			if len(z) < len(p) {
				out = append(hdr, z...)
				out[1] = codecS2
			}
		}
	}
	if out[1] == codecRaw {
		out = append(out, p...)
	}
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// DecodeBlob decodes the stored record of blob h, checking its CRC, the
// zstd frame checksum and the length. Any mismatch is ErrCorrupt naming
// the hash; garbage is never returned. The result never aliases rec.
func DecodeBlob(h Hash, rec []byte, maxRaw int64) ([]byte, error) {
	if len(rec) < 2+1+4 || rec[0] != blobVersion {
		return nil, fmt.Errorf("%w: blob %s: bad record header", ErrCorrupt, h)
	}
	body, sum := rec[:len(rec)-4], binary.BigEndian.Uint32(rec[len(rec)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: blob %s: checksum mismatch", ErrCorrupt, h)
	}
	rawLen, n := binary.Uvarint(body[2:])
	if n <= 0 || rawLen > uint64(maxRaw) {
		return nil, fmt.Errorf("%w: blob %s: bad raw length", ErrCorrupt, h)
	}
	stored := body[2+n:]
	var p []byte
	switch rec[1] {
	case codecRaw:
		p = append([]byte(nil), stored...)
	case codecZstd:
		_, dec := zstdCodecs()
		var err error
		p, err = dec.DecodeAll(stored, make([]byte, 0, rawLen))
		if err != nil {
			return nil, fmt.Errorf("%w: blob %s: %v", ErrCorrupt, h, err)
		}
	case codecS2:
		n, err := s2.DecodedLen(stored)
		if err != nil || uint64(n) != rawLen {
			return nil, fmt.Errorf("%w: blob %s: bad s2 length", ErrCorrupt, h)
		}
		if p, err = s2.Decode(make([]byte, n), stored); err != nil {
			return nil, fmt.Errorf("%w: blob %s: %v", ErrCorrupt, h, err)
		}
	default:
		return nil, fmt.Errorf("%w: blob %s: unknown codec %d", ErrCorrupt, h, rec[1])
	}
	if uint64(len(p)) != rawLen {
		return nil, fmt.Errorf("%w: blob %s: length %d, record says %d", ErrCorrupt, h, len(p), rawLen)
	}
	return p, nil
}
