package cli

import (
	"context"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress shows how far long work has come: a bar on standard error when
// it is a terminal, nothing otherwise (scripts and tests see none).
type progress interface {
	// Set moves the bar to done of total (total 0: not known yet).
	Set(done, total int)
	// Finish ends the bar: complete when ok, aborted otherwise.
	Finish(ok bool)
}

type noProgress struct{}

func (noProgress) Set(int, int) {}
func (noProgress) Finish(bool)  {}

// newProgress returns a progress bar labelled label.
func (g *globals) newProgress(ctx context.Context, label string) progress {
	if !g.env.terminal(g.env.Stderr) {
		return noProgress{}
	}
	// Auto refresh: the Env says stderr is a terminal, whatever its type.
	p := mpb.NewWithContext(ctx, mpb.WithOutput(g.env.Stderr), mpb.WithWidth(40), mpb.WithAutoRefresh())
	bar := p.AddBar(0,
		mpb.PrependDecorators(decor.Name(label+" ", decor.WCSyncSpaceR), decor.CountersNoUnit("%d / %d", decor.WCSyncWidth)),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO)),
	)
	return &mpbProgress{p: p, bar: bar}
}

type mpbProgress struct {
	p     *mpb.Progress
	bar   *mpb.Bar
	total int
}

func (m *mpbProgress) Set(done, total int) {
	if total != m.total && total > 0 {
		m.total = total
		m.bar.SetTotal(int64(total), false)
	}
	m.bar.SetCurrent(int64(done))
}

func (m *mpbProgress) Finish(ok bool) {
	if ok {
		if m.total == 0 {
			m.bar.SetTotal(m.bar.Current(), true)
		} else {
			m.bar.SetTotal(int64(m.total), true)
		}
	} else {
		m.bar.Abort(false)
	}
	m.p.Wait()
}
