package vision

// Occupy takes one of g's places, as a map's worker does for an image,
// until release.
func Occupy(g *Gate) (release func()) {
	g.places <- struct{}{}
	return func() { <-g.places }
}
