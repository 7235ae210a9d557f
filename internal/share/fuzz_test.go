package share

import (
	"testing"
)

// FuzzWindow interprets the input as a sequence of window operations, two
// bytes each (an opcode with a job number, and an argument), and checks the
// invariants after each. Unlike the property test it does not follow the
// read protocol: it pushes whenever it likes, reads without producing and
// leaves and joins at random, so it also covers misuse. The first byte picks
// the window's byte bound and the second its item bound.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{64, 8, 0x00, 0, 0x10, 0, 0x30, 10, 0x20, 0})
	f.Add([]byte{16, 2, 0x00, 0, 0x01, 0, 0x30, 16, 0x20, 0, 0x30, 17, 0x21, 0, 0x10, 0, 0x11, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		maxBytes := int64(data[0]) // 0 is a valid bound: only empty items fit
		maxItems := int(data[1]%16) + 1
		m := newModel(maxBytes, maxItems)
		jobs := [4]string{"a", "b", "c", "d"}
		for ops := data[2:]; len(ops) >= 2; ops = ops[2:] {
			op, arg := ops[0]>>4, ops[1]
			job := jobs[ops[0]&3]
			var err error
			switch op % 5 {
			case 0:
				err = m.join(job)
			case 1:
				m.leave(job)
				err = m.check()
			case 2:
				_, err = m.next(job)
			case 3:
				err = m.push(int64(arg) - 4) // a few negative sizes
			case 4:
				if _, ok := m.w.JobStats(job); ok != hasJob(m, job) {
					t.Fatalf("JobStats(%q) ok=%v", job, ok)
				}
				if len(m.w.Jobs()) != len(m.last) {
					t.Fatalf("Jobs() = %v", m.w.Jobs())
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func hasJob(m *model, job string) bool {
	_, ok := m.last[job]
	return ok
}

// push pushes outside the read protocol and checks the outcome against
// what the window's state allows.
func (m *model) push(size int64) error {
	before := m.w.Stats()
	demand := m.w.demand()
	ev, err := m.w.Push(item{seq: before.End, size: size})
	after := m.w.Stats()
	switch {
	case size < 0 || size > m.max || !demand:
		if err == nil || after != before {
			return errorf("push of %d bytes (bound %d, demand %v): err %v, stats %+v -> %+v", size, m.max, demand, err, before, after)
		}
	case err != nil:
		return errorf("push of %d bytes (bound %d) with demand: %v", size, m.max, err)
	case after.End != before.End+1 || after.Evicted != before.Evicted+int64(ev) || after.Start != before.Start+int64(ev):
		return errorf("push: stats %+v -> %+v, evicted %d", before, after, ev)
	}
	return m.check()
}
