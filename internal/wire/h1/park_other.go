//go:build !linux

package h1

// parker parks nothing off Linux: an idle connection keeps its watcher.
type parker struct{ srv *Server }

func (p *parker) init(s *Server)  { p.srv = s }
func (p *parker) park(*conn) bool { return false }
func (p *parker) drop(*conn) bool { return false }
func (p *parker) stop()           {}
