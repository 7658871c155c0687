package testmodels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pipemare/pipemare/internal/testkit/testutil"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// This file recomputes every model's cost with plain Go loops, straight from
// the architecture documented on its builder, and compares it with the cost
// the Gorgonia graph computes. It guards against a graph that is internally
// consistent (so finite differences agree) but not the documented model.

// refParams maps learnable names (without the model prefix) to float64
// copies of their values.
type refParams map[string][]float64

func paramsOf(tb testing.TB, m *Model) refParams {
	p := refParams{}
	for _, l := range m.Learnables {
		p[l.Name()[len(m.Name)+1:]] = testutil.Floats(tb, l.Value())
	}
	return p
}

// refLinear computes x·W + b for x (n, in), W (in, out), b (1, out).
func refLinear(p refParams, name string, x []float64, n, in, out int) []float64 {
	w, b := p[name+".W"], p[name+".b"]
	y := make([]float64, n*out)
	for i := 0; i < n; i++ {
		for o := 0; o < out; o++ {
			s := b[o]
			for k := 0; k < in; k++ {
				s += x[i*in+k] * w[k*out+o]
			}
			y[i*out+o] = s
		}
	}
	return y
}

func refMap(x []float64, f func(float64) float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = f(v)
	}
	return y
}

func relu(v float64) float64 { return math.Max(v, 0) }

// refCE is the mean over rows of -sum_j y_ij log softmax(logits_i)_j.
func refCE(logits, y []float64, n, c int) float64 {
	total := 0.0
	for i := 0; i < n; i++ {
		row := logits[i*c : (i+1)*c]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		se := 0.0
		for _, v := range row {
			se += math.Exp(v - mx)
		}
		lse := mx + math.Log(se)
		for j, v := range row {
			total -= y[i*c+j] * (v - lse)
		}
	}
	return total / float64(n)
}

func refMLP(p refParams, x, y []float64, n int) float64 {
	h := refMap(refLinear(p, "fc1", x, n, 16, 16), relu)
	h = refMap(refLinear(p, "fc2", h, n, 16, 8), math.Tanh)
	return refCE(refLinear(p, "fc3", h, n, 8, NumClasses), y, n, NumClasses)
}

func refResNet(p refParams, x, y []float64, n int) float64 {
	h0 := refMap(refLinear(p, "stem", x, n, 16, 8), math.Tanh)
	h := h0
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("block%d", i)
		f := refMap(refLinear(p, name+".fc1", h, n, 8, 8), relu)
		f = refLinear(p, name+".fc2", f, n, 8, 8)
		next := make([]float64, len(h))
		for j := range h {
			next[j] = relu(h[j] + f[j])
		}
		h = next
	}
	for j := range h {
		h[j] += h0[j]
	}
	return refCE(refLinear(p, "head", h, n, 8, NumClasses), y, n, NumClasses)
}

// refConv is a 3×3, stride 1, pad 1 cross-correlation of x (n, ci, s, s)
// with w (co, ci, 3, 3).
func refConv(x, w []float64, n, ci, co, s int) []float64 {
	y := make([]float64, n*co*s*s)
	for b := 0; b < n; b++ {
		for o := 0; o < co; o++ {
			for i := 0; i < s; i++ {
				for j := 0; j < s; j++ {
					sum := 0.0
					for c := 0; c < ci; c++ {
						for ki := 0; ki < 3; ki++ {
							for kj := 0; kj < 3; kj++ {
								ii, jj := i+ki-1, j+kj-1
								if ii < 0 || jj < 0 || ii >= s || jj >= s {
									continue
								}
								sum += x[((b*ci+c)*s+ii)*s+jj] * w[((o*ci+c)*3+ki)*3+kj]
							}
						}
					}
					y[((b*co+o)*s+i)*s+j] = sum
				}
			}
		}
	}
	return y
}

// refBatchNorm normalises each channel of x (n, c, s, s) with the batch
// mean and biased batch variance, then applies scale and bias.
func refBatchNorm(p refParams, name string, x []float64, n, c, s int) []float64 {
	scale, bias := p[name+".scale"], p[name+".bias"]
	y := make([]float64, len(x))
	m := float64(n * s * s)
	for ch := 0; ch < c; ch++ {
		idx := func(b, k int) int { return (b*c+ch)*s*s + k }
		mean, vr := 0.0, 0.0
		for b := 0; b < n; b++ {
			for k := 0; k < s*s; k++ {
				mean += x[idx(b, k)]
			}
		}
		mean /= m
		for b := 0; b < n; b++ {
			for k := 0; k < s*s; k++ {
				d := x[idx(b, k)] - mean
				vr += d * d
			}
		}
		vr /= m
		inv := 1 / math.Sqrt(vr+1e-5)
		for b := 0; b < n; b++ {
			for k := 0; k < s*s; k++ {
				y[idx(b, k)] = scale[ch]*(x[idx(b, k)]-mean)*inv + bias[ch]
			}
		}
	}
	return y
}

// refMaxPool is a 2×2, stride 2 max pool of x (n, c, s, s).
func refMaxPool(x []float64, n, c, s int) []float64 {
	h := s / 2
	y := make([]float64, n*c*h*h)
	for bc := 0; bc < n*c; bc++ {
		for i := 0; i < h; i++ {
			for j := 0; j < h; j++ {
				mx := math.Inf(-1)
				for di := 0; di < 2; di++ {
					for dj := 0; dj < 2; dj++ {
						mx = math.Max(mx, x[(bc*s+2*i+di)*s+2*j+dj])
					}
				}
				y[(bc*h+i)*h+j] = mx
			}
		}
	}
	return y
}

func refCNN(p refParams, x, y []float64, n int) float64 {
	h := refConv(x, p["conv1.W"], n, 1, 4, 8)
	h = refMap(refBatchNorm(p, "bn1", h, n, 4, 8), relu)
	h = refMaxPool(h, n, 4, 8)
	h = refConv(h, p["conv2.W"], n, 4, 8, 4)
	h = refMap(refBatchNorm(p, "bn2", h, n, 8, 4), relu)
	return refCE(refLinear(p, "fc", h, n, 128, NumClasses), y, n, NumClasses)
}

func refAttention(p refParams, x, y []float64, n int) float64 {
	const T, D, H = 4, 8, 8
	proj := func(w []float64) []float64 {
		out := make([]float64, n*T*D)
		for r := 0; r < n*T; r++ {
			for o := 0; o < D; o++ {
				for k := 0; k < D; k++ {
					out[r*D+o] += x[r*D+k] * w[k*D+o]
				}
			}
		}
		return out
	}
	q, k, v := proj(p["Wq"]), proj(p["Wk"]), proj(p["Wv"])
	r := append([]float64(nil), x...) // residual: x + attention
	for b := 0; b < n; b++ {
		for i := 0; i < T; i++ {
			scores := make([]float64, T)
			mx := math.Inf(-1)
			for j := 0; j < T; j++ {
				for d := 0; d < D; d++ {
					scores[j] += q[(b*T+i)*D+d] * k[(b*T+j)*D+d]
				}
				scores[j] /= math.Sqrt(D)
				mx = math.Max(mx, scores[j])
			}
			se := 0.0
			for j := range scores {
				scores[j] = math.Exp(scores[j] - mx)
				se += scores[j]
			}
			for j := range scores {
				for d := 0; d < D; d++ {
					r[(b*T+i)*D+d] += scores[j] / se * v[(b*T+j)*D+d]
				}
			}
		}
	}
	gain, bias := p["ln.gain"], p["ln.bias"]
	ln := make([]float64, len(r))
	for row := 0; row < n*T; row++ {
		vals := r[row*D : (row+1)*D]
		mean, vr := 0.0, 0.0
		for _, val := range vals {
			mean += val
		}
		mean /= D
		for _, val := range vals {
			vr += (val - mean) * (val - mean)
		}
		vr /= D
		for d, val := range vals {
			ln[row*D+d] = (val-mean)/math.Sqrt(vr+1e-5)*gain[d] + bias[d]
		}
	}
	ff := refMap(refLinear(p, "ff", ln, n*T, D, H), math.Tanh)
	pooled := make([]float64, n*H)
	for b := 0; b < n; b++ {
		for t := 0; t < T; t++ {
			for h := 0; h < H; h++ {
				pooled[b*H+h] += ff[(b*T+t)*H+h] / T
			}
		}
	}
	return refCE(refLinear(p, "head", pooled, n, H, NumClasses), y, n, NumClasses)
}

// refMatMul is x·w for x (n, in) and w (in, out).
func refMatMul(x, w []float64, n, in, out int) []float64 {
	y := make([]float64, n*out)
	for i := 0; i < n; i++ {
		for o := 0; o < out; o++ {
			for k := 0; k < in; k++ {
				y[i*out+o] += x[i*in+k] * w[k*out+o]
			}
		}
	}
	return y
}

func refTied(p refParams, x, y []float64, n int) float64 {
	const d = 16
	e := p["E"] // (NumClasses, d)
	h := refMatMul(x, e, n, NumClasses, d)
	h = refMap(refLinear(p, "fc1", h, n, d, d), math.Tanh)
	h = refMap(refLinear(p, "fc2", h, n, d, d), math.Tanh)
	logits := make([]float64, n*NumClasses)
	for i := 0; i < n; i++ {
		for c := 0; c < NumClasses; c++ {
			s := p["out.b"][c]
			for k := 0; k < d; k++ {
				s += h[i*d+k] * e[c*d+k] // Eᵀ[k][c] = E[c][k]
			}
			logits[i*NumClasses+c] = s
		}
	}
	return refCE(logits, y, n, NumClasses)
}

func refGRU(p refParams, x, y []float64, n int) float64 {
	const D, H = gruInput, gruHidden
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	h := make([]float64, n*H)
	concat := func(a []float64, wa int, b []float64, wb int) []float64 {
		out := make([]float64, 0, n*(wa+wb))
		for i := 0; i < n; i++ {
			out = append(append(out, a[i*wa:(i+1)*wa]...), b[i*wb:(i+1)*wb]...)
		}
		return out
	}
	for t := 0; t < gruSteps; t++ {
		xt := make([]float64, 0, n*D)
		for i := 0; i < n; i++ {
			xt = append(xt, x[i*gruSteps*D+t*D:i*gruSteps*D+(t+1)*D]...)
		}
		g := refMap(refLinear(p, "gate", concat(xt, D, h, H), n, D+H, 2*H), sigmoid)
		rh := make([]float64, n*H)
		for i := 0; i < n; i++ {
			for j := 0; j < H; j++ {
				rh[i*H+j] = g[i*2*H+H+j] * h[i*H+j]
			}
		}
		c := refMap(refLinear(p, "cand", concat(xt, D, rh, H), n, D+H, H), math.Tanh)
		for i := 0; i < n; i++ {
			for j := 0; j < H; j++ {
				z := g[i*2*H+j]
				h[i*H+j] += z * (c[i*H+j] - h[i*H+j])
			}
		}
	}
	return refCE(refLinear(p, "head", h, n, H, NumClasses), y, n, NumClasses)
}

func refPenalty(p refParams, x, y []float64, n int) float64 {
	l2 := 0.0
	for _, w := range p["fc1.W"] {
		l2 += w * w
	}
	return refMLP(p, x, y, n) + PenaltyWeight*l2
}

var references = map[string]func(p refParams, x, y []float64, n int) float64{
	"mlp":       refMLP,
	"cnn":       refCNN,
	"resnet":    refResNet,
	"attention": refAttention,
	"tied":      refTied,
	"gru":       refGRU,
	"penalty":   refPenalty,
}

func TestCostMatchesReference(t *testing.T) {
	for _, nb := range every() {
		for _, dt := range dtypes {
			for _, withGrad := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/grad=%v", nb.Name, dt, withGrad), func(t *testing.T) {
					ref, ok := references[nb.Name]
					if !ok {
						t.Fatalf("no reference implementation for %s", nb.Name)
					}
					m := build(t, nb, dt, 17)
					if withGrad {
						if _, err := gorgonia.Grad(m.Cost, m.Learnables...); err != nil {
							t.Fatal(err)
						}
					}
					var cost gorgonia.Value
					gorgonia.Read(m.Cost, &cost)
					vm := gorgonia.NewTapeMachine(m.Graph)
					defer vm.Close()
					rng := rand.New(rand.NewSource(23))
					for range 2 { // the second run reuses the machine's registers
						batch := m.Batch(rng)
						x, y := testutil.Floats(t, batch[0]), testutil.Floats(t, batch[1])
						params := paramsOf(t, m)
						for i, v := range batch {
							if err := gorgonia.Let(m.Inputs[i], v); err != nil {
								t.Fatal(err)
							}
						}
						vm.Reset()
						if err := vm.RunAll(); err != nil {
							t.Fatal(err)
						}
						got := scalarOf(t, cost)
						want := ref(params, x, y, testBatch)
						tol := 1e-12
						if dt == tensor.Float32 {
							tol = 1e-5
						}
						if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
							t.Fatalf("cost %.15g, reference %.15g", got, want)
						}
					}
				})
			}
		}
	}
}
