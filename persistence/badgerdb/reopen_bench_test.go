package badgerdb

import "testing"

// BenchmarkReadGate is what the reopen gate adds to every Badger read:
// entering and leaving it, alone and from every CPU at once.
func BenchmarkReadGate(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		var g readGate
		for b.Loop() {
			g.enter()
			g.leave()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var g readGate
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				g.enter()
				g.leave()
			}
		})
	})
}
