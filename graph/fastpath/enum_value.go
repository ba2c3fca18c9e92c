package fastpath

// enumValue reads a GraphQL enum value given as a string (a variable or a
// literal) into the domain type bound to it, reporting false for anything
// that is not a string or not one of the type's values.
func enumValue[T ~string](v any, valid func(T) bool) (T, bool) {
	s, ok := v.(string)
	if !ok || !valid(T(s)) {
		return "", false
	}
	return T(s), true
}
