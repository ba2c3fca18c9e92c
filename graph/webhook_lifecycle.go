package graph

// positiveOrNull is n, or null for 0 (a limit that is not set).
func positiveOrNull(n int) *int {
	if n <= 0 {
		return nil
	}
	return &n
}
