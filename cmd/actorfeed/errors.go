package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers/format"
)

// verbose is the root's --verbose: errors are shown with the whole chain
// of what was under way, stage by stage, as the library wraps them.
var verbose bool

// userMessage is the one line a user sees for err: the input, what is
// wrong with it and what to do, without the stages the error passed
// through on its way up (program, reader, stage, index), which --verbose
// shows.
func userMessage(err error) string {
	if verbose {
		return err.Error()
	}
	if fe, ok := errors.AsType[*format.Error](err); ok {
		return damageMessage(fe)
	}
	_, staged := errors.AsType[*actors.StageError](err)
	if pe, ok := errors.AsType[*fs.PathError](err); ok && staged { // a data file; the CLI's own say which flag
		return pathMessage(pe)
	}
	if errors.Is(err, actors.ErrBadSpec) { // what is wrong is said last
		s, mark := err.Error(), actors.ErrBadSpec.Error()+": "
		if i := strings.LastIndex(s, mark); i >= 0 {
			return s[i+len(mark):]
		}
	}
	if se, ok := errors.AsType[*actors.StageError](err); ok {
		return fmt.Sprintf("stage %s: %s", se.Stage, cause(se.Err))
	}
	return err.Error()
}

// damageMessage names the file, where in it, and what is wrong, then
// what to do about damaged data.
func damageMessage(fe *format.Error) string {
	msg := damageWhere(fe)
	switch {
	case errors.Is(fe, format.ErrFraming):
		msg += fmt.Sprintf("; the %s file's framing is damaged here, so where its next record starts cannot be found: --on-corrupt skip reads the records before it and lists the rest of the file as lost, actorfeed inspect shows it", fe.Format)
	case errors.Is(fe, format.ErrCorrupt):
		msg += fmt.Sprintf("; the %s data is damaged: --on-corrupt skip skips it, actorfeed inspect shows it", fe.Format)
	}
	return msg
}

// damageWhere names the file, where in it, and what is wrong.
func damageWhere(fe *format.Error) string {
	where := fe.File
	if at := fe.Where(); at != "" {
		where += " (" + at + ")"
	}
	return fmt.Sprintf("%s: %s", where, cause(fe.Err))
}

// pathMessage is a failed file operation's path and cause.
func pathMessage(pe *fs.PathError) string {
	switch {
	case errors.Is(pe, fs.ErrNotExist):
		return fmt.Sprintf("%s: no such file or directory", pe.Path)
	case errors.Is(pe, fs.ErrPermission):
		return fmt.Sprintf("%s: permission denied", pe.Path)
	}
	return fmt.Sprintf("%s: %s", pe.Path, cause(pe.Err))
}

// cause is err's text without the sentinels it wraps at its front
// ("format: corrupt data: ...", "unexpected EOF (format: corrupt data):
// ..."), which the line's hint says in words.
func cause(err error) string {
	s := err.Error()
	for _, prefix := range []string{
		format.ErrCorrupt.Error() + ": ",
		"unexpected EOF (" + format.ErrCorrupt.Error() + "): ",
		actors.ErrBadSpec.Error() + ": ",
		"format: ",
	} {
		s = strings.TrimPrefix(s, prefix)
	}
	return s
}
