package order

// Job is one window of a rank's work: the window's S positions are read
// (Epoch.Pieces(Start, Start+Len)), permuted (Epoch.Perm(Window)), and the
// job-local G positions of its parts delivered, part after part. Of an
// order that permutes no record, a job is the part of a window the rank
// delivers, and S and G are the same there.
type Job struct {
	Window uint64 // the window's index j
	Start  uint64 // the job's first position, in S and in G: the window's, or the part's
	Len    int    // positions in the job
	Part          // the first part
	// More are the parts after the first, when the rank's consecutive
	// segments fall in the window more than once (a layout re-dealt with
	// holes): the window is read once for all of them.
	More []Part
}

// Part is a run of a window that a rank delivers: job-local G positions
// [Lo, Hi), from rank position At.
type Part struct {
	Lo, Hi int  // job-local G positions to deliver
	Pad    bool // the delivered positions are padding
	// At is the rank's position (its count of delivered positions, from
	// the start of its shard) of the part's first delivered position.
	At uint64
}

// Jobs walks a rank's segments window by window.
type Jobs struct {
	ep   *Epoch
	segs Segments
	seg  Segment // the segment being walked
	more bool    // seg is one
	g    uint64  // the next G position of seg
}

// Segments gives a rank's segments one at a time: a Walk, or a slice of
// them (Slice).
type Segments interface {
	Next() (Segment, bool)
}

// Slice is segments held in a slice, as Segments.
type Slice []Segment

// Next is the first segment, taken off s.
func (s *Slice) Next() (Segment, bool) {
	if len(*s) == 0 {
		return Segment{}, false
	}
	sg := (*s)[0]
	*s = (*s)[1:]
	return sg, true
}

// Jobs returns the jobs of a rank (or a lane of one) that delivers segs.
func (ep *Epoch) Jobs(segs []Segment) *Jobs {
	s := Slice(segs)
	return ep.JobsOf(&s)
}

// JobsOf returns the jobs of a rank that delivers the segments of segs.
func (ep *Epoch) JobsOf(segs Segments) *Jobs {
	j := &Jobs{ep: ep, segs: segs}
	j.seg, j.more = segs.Next()
	j.g = j.seg.Lo
	return j
}

// Next is the next job, false at the end. The segments that follow one
// another in the same window make one job: a part each, or one part where
// they continue each other. An order that permutes no record reads no
// more of a window than the rank delivers: its job is one part, from the
// part's first position (a rank of a global batch takes a slice of each
// step, and would otherwise read every window whole).
func (j *Jobs) Next() (Job, bool) {
	if !j.skipDone() {
		return Job{}, false
	}
	w := j.ep.o.window
	win := j.g / w
	start := win * w
	if !j.ep.o.permute {
		end := min(j.seg.Hi, start+w)
		job := Job{Window: win, Start: j.g, Len: int(end - j.g), Part: Part{Lo: 0, Hi: int(end - j.g), Pad: j.seg.Pad, At: j.seg.At + (j.g - j.seg.Lo)}}
		j.g = end
		return job, true
	}
	job := Job{Window: win, Start: start, Len: j.ep.windowLen(win)}
	for first := true; j.skipDone() && j.g/w == win; first = false {
		sg := j.seg
		end := min(sg.Hi, start+w)
		p := Part{Lo: int(j.g - start), Hi: int(end - start), Pad: sg.Pad, At: sg.At + (j.g - sg.Lo)}
		j.g = end
		switch last := job.last(); {
		case first:
			job.Part = p
		case last.Pad == p.Pad && last.Hi == p.Lo && last.At+uint64(last.Hi-last.Lo) == p.At:
			last.Hi = p.Hi
		default:
			job.More = append(job.More, p)
		}
	}
	return job, true
}

// last is the job's last part.
func (j *Job) last() *Part {
	if n := len(j.More); n > 0 {
		return &j.More[n-1]
	}
	return &j.Part
}

// skipDone moves past the segments delivered already; false when none is
// left.
func (j *Jobs) skipDone() bool {
	for j.more && j.g >= j.seg.Hi {
		if j.seg, j.more = j.segs.Next(); j.more {
			j.g = j.seg.Lo
		}
	}
	return j.more
}
