package update

// Float is the element type of a learnable: the loops run over float32
// eight at a time, over float64 one at a time.
type Float interface{ ~float32 | ~float64 }

// Momentum sets, for each i, v[i] = v[i]·β + g[i]·negEta and then
// w[i] = w[i] + v[i]: gorgonia's Momentum step, negEta being −η.
func Momentum[T Float](w, g, v []T, beta, negEta T) {
	g, v = g[:len(w)], v[:len(w)]
	n := 0
	if w32, ok := any(w).([]float32); ok && wide && len(w) >= 8 {
		n = len(w) &^ 7
		momentum8(&w32[0], &any(g).([]float32)[0], &any(v).([]float32)[0], n, float32(beta), float32(negEta))
	}
	for i := n; i < len(w); i++ {
		c := T(v[i]*beta) + T(g[i]*negEta)
		v[i] = c
		w[i] = w[i] + c
	}
}

// Velocity sets, for each i, d[i] = γ·d[i] + (1−γ)·(w[i] − old[i]): T2's
// velocity estimate after a step took the weights from old to w.
func Velocity[T Float](d, w, old []T, gamma T) {
	w, old = w[:len(d)], old[:len(d)]
	rest := 1 - gamma
	n := 0
	if d32, ok := any(d).([]float32); ok && wide && len(d) >= 8 {
		n = len(d) &^ 7
		velocity8(&d32[0], &any(w).([]float32)[0], &any(old).([]float32)[0], n, float32(gamma), float32(rest))
	}
	for i := n; i < len(d); i++ {
		d[i] = T(gamma*d[i]) + T(rest*(w[i]-old[i]))
	}
}

// Shift sets, for each i, dst[i] = w[i] − k·d[i]: the weights extrapolated
// along the velocity d (backward by k steps, or forward for a negative k).
func Shift[T Float](dst, w, d []T, k T) {
	w, d = w[:len(dst)], d[:len(dst)]
	n := 0
	if dst32, ok := any(dst).([]float32); ok && wide && len(dst) >= 8 {
		n = len(dst) &^ 7
		shift8(&dst32[0], &any(w).([]float32)[0], &any(d).([]float32)[0], n, float32(k))
	}
	for i := n; i < len(dst); i++ {
		dst[i] = w[i] - T(k*d[i])
	}
}
