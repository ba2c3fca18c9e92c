package fastpath

// PagesServed returns how many auditEvents pages AroundRootFields served
// (rather than the generic executor).
func (p *Paths) PagesServed() uint64 { return p.pages.Load() }
