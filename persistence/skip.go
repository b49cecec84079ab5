package persistence

import "math/bits"

// Skip pointers. A turn at depth d > 0 stores, besides its parent, its
// ancestors at depths d - 2^k for 1 <= k <= tz(d), where tz(d) is the number
// of trailing zero bits of d (and 2^k <= d). On average a turn stores one
// extra pointer, yet the ancestor at any depth is reached in at most about
// 2·log2(d) hops: jumps grow while the trailing zeros allow it, then shrink.

// SkipLevels returns how many skip pointers (beyond the parent) a turn at
// depth d stores.
func SkipLevels(d uint64) int {
	if d == 0 {
		return 0
	}
	k := bits.TrailingZeros64(d)
	for k > 0 && uint64(1)<<k > d {
		k--
	}
	return k
}

// NextHop returns the level to jump from depth d towards target (< d): the
// largest k <= skipLevels(d) with d - 2^k >= target. Level 0 is the parent.
func NextHop(d, target uint64) int {
	k := SkipLevels(d)
	for k > 0 && d-uint64(1)<<k < target {
		k--
	}
	return k
}
