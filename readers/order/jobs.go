package order

// Job is one window of a rank's work: the window's S positions are read
// (Epoch.Pieces(Start, Start+Len)), permuted (Epoch.Perm(Window)), and the
// window-local G positions of its parts delivered, part after part.
type Job struct {
	Window uint64 // the window's index j
	Start  uint64 // the window's first position, in S and in G
	Len    int    // positions in the window
	Part          // the first part
	// More are the parts after the first, when the rank's consecutive
	// segments fall in the window more than once (a layout re-dealt with
	// holes): the window is read once for all of them.
	More []Part
}

// Part is a run of a window that a rank delivers: window-local G
// positions [Lo, Hi), from rank position At.
type Part struct {
	Lo, Hi int  // window-local G positions to deliver
	Pad    bool // the delivered positions are padding
	// At is the rank's position (its count of delivered positions, from
	// the start of its shard) of the part's first delivered position.
	At uint64
}

// Jobs walks a rank's segments window by window.
type Jobs struct {
	ep   *Epoch
	segs []Segment
	g    uint64 // the next G position of segs[0]
}

// Jobs returns the jobs of a rank (or a lane of one) that delivers segs.
func (ep *Epoch) Jobs(segs []Segment) *Jobs {
	j := &Jobs{ep: ep, segs: segs}
	if len(segs) > 0 {
		j.g = segs[0].Lo
	}
	return j
}

// Next is the next job, false at the end. The segments that follow one
// another in the same window make one job: a part each, or one part where
// they continue each other.
func (j *Jobs) Next() (Job, bool) {
	if !j.skipDone() {
		return Job{}, false
	}
	w := j.ep.o.window
	win := j.g / w
	start := win * w
	job := Job{Window: win, Start: start, Len: j.ep.windowLen(win)}
	for first := true; j.skipDone() && j.g/w == win; first = false {
		sg := j.segs[0]
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

// skipDone drops the segments delivered already; false when none is left.
func (j *Jobs) skipDone() bool {
	for len(j.segs) > 0 && j.g >= j.segs[0].Hi {
		j.segs = j.segs[1:]
		if len(j.segs) > 0 {
			j.g = j.segs[0].Lo
		}
	}
	return len(j.segs) > 0
}
