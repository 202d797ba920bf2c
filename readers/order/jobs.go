package order

// Job is one window of a rank's work: the window's S positions are read
// (Epoch.Pieces(Start, Start+Len)), permuted (Epoch.Perm(Window)), and the
// window-local G positions [Lo, Hi) delivered.
type Job struct {
	Window uint64 // the window's index j
	Start  uint64 // the window's first position, in S and in G
	Len    int    // positions in the window
	Lo, Hi int    // window-local G positions to deliver
	Pad    bool   // the delivered positions are padding
	// At is the rank's position (its count of delivered positions, from
	// the start of its shard) of the job's first delivered position.
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

// Next is the next job, false at the end.
func (j *Jobs) Next() (Job, bool) {
	for len(j.segs) > 0 && j.g >= j.segs[0].Hi {
		j.segs = j.segs[1:]
		if len(j.segs) > 0 {
			j.g = j.segs[0].Lo
		}
	}
	if len(j.segs) == 0 {
		return Job{}, false
	}
	w := j.ep.o.window
	win := j.g / w
	start := win * w
	end := min(j.segs[0].Hi, start+w)
	sg := j.segs[0]
	job := Job{Window: win, Start: start, Len: j.ep.windowLen(win), Lo: int(j.g - start), Hi: int(end - start), Pad: sg.Pad, At: sg.At + (j.g - sg.Lo)}
	j.g = end
	return job, true
}
