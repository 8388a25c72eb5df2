package corpusgen

import "strings"

// Target size of the generated corpus. Generate adds whole documents until
// the text is at least this long.
const targetBytes = 850_000

// seed fixes the corpus. Change it (and regenerate) for a different text.
const seed = 0x7167_7074_2025 // "tgpt" 2025

// Generate returns the built-in corpus as written by the generator. The
// result is fully determined by the code: it uses its own small random
// number generator (splitmix64), not math/rand, so it is the same on every
// Go version and platform. corpus.txt must equal Generate().
func Generate() []byte {
	g := &gen{r: rng{s: seed}, words: vocabulary()}
	// Each genre has a weight: roughly how many documents in a hundred
	// are of that kind.
	genres := []struct {
		weight int
		write  func() string
	}{
		{26, g.story},
		{13, g.letter},
		{9, g.recipe},
		{12, g.poem},
		{12, g.play},
		{7, g.shipLog},
		{7, g.diary},
		{9, g.fable},
		{5, g.facts},
	}
	total := 0
	for _, gn := range genres {
		total += gn.weight
	}
	var out strings.Builder
	for out.Len() < targetBytes {
		k := g.r.intn(total)
		for _, gn := range genres {
			if k < gn.weight {
				if out.Len() > 0 {
					out.WriteString("\n") // blank line between documents
				}
				out.WriteString(gn.write())
				out.WriteString("\n")
				break
			}
			k -= gn.weight
		}
	}
	return []byte(out.String())
}

// rng is splitmix64: tiny, fast and with a fixed, documented output stream.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n). The tiny modulo bias does not matter here.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// chance reports true with probability pct percent.
func (r *rng) chance(pct int) bool { return r.intn(100) < pct }

// between returns a number in [lo, hi].
func (r *rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

// gen holds the generator state: the random stream and the word lists.
type gen struct {
	r     rng
	words map[string][]string
	link  int // position for linked choices <#...>
}

// relink starts a new group of linked choices.
func (g *gen) relink() { g.link = g.r.intn(720720) }

// ctx holds the fixed choices of one document (who is in it, the weather,
// the lost thing...), so that every sentence tells the same story.
type ctx map[string]string

func (g *gen) pick(list []string) string { return list[g.r.intn(len(list))] }

// word picks one entry of a named word list, expanded.
func (g *gen) word(list string, c ctx) string {
	return g.expand(g.pick(g.list(list)), c)
}

func (g *gen) list(name string) []string {
	l, ok := g.words[name]
	if !ok {
		panic("corpusgen: no word list " + name)
	}
	return l
}

// distinct picks n different entries of a word list and stores them in c
// as prefix1, prefix2, ... (for example p1, p2, p3 for three places).
func (g *gen) distinct(c ctx, list, prefix string, n int) {
	l := g.list(list)
	used := map[int]bool{}
	for i := 1; i <= n; i++ {
		k := g.r.intn(len(l))
		for used[k] {
			k = (k + 1) % len(l)
		}
		used[k] = true
		c[prefix+string(rune('0'+i))] = g.expand(l[k], c)
	}
}

// expand fills in a template. The little template language:
//
//	{key}     the value of key in the document context, or else a random
//	          entry of the word list key (itself expanded)
//	{Key}     the same, with the first letter made upper case
//	{a:key}   the same, with "a" or "an" in front
//	<x|y|z>   one of the alternatives at random (they may nest)
//	<#x|y|z>  a linked choice: all linked choices made until the next
//	          call of relink take the same position, so that a question
//	          and its answer in two templates fit together
func (g *gen) expand(s string, c ctx) string {
	if !strings.ContainsAny(s, "{<") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch s[i] {
		case '{':
			j := i + strings.IndexByte(s[i:], '}')
			b.WriteString(g.lookup(s[i+1:j], c))
			i = j + 1
		case '<':
			depth, start := 0, i+1
			var alts []string
			j := i
			for ; j < len(s); j++ {
				switch s[j] {
				case '<':
					depth++
				case '>':
					depth--
				case '|':
					if depth == 1 {
						alts = append(alts, s[start:j])
						start = j + 1
					}
				}
				if depth == 0 {
					break
				}
			}
			alts = append(alts, s[start:j])
			if strings.HasPrefix(alts[0], "#") {
				alts[0] = alts[0][1:]
				b.WriteString(g.expand(alts[g.link%len(alts)], c))
			} else {
				b.WriteString(g.expand(g.pick(alts), c))
			}
			i = j + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

func (g *gen) lookup(key string, c ctx) string {
	if k, ok := strings.CutPrefix(key, "a:"); ok {
		return article(g.lookup(k, c))
	}
	if v, ok := c[key]; ok {
		return v
	}
	if _, ok := g.words[key]; ok {
		return g.word(key, c)
	}
	// {Key} or {A.He}: look up the lower case key, then capitalize.
	dot := strings.LastIndexByte(key, '.') + 1
	if low := key[:dot] + lowerFirst(key[dot:]); low != key {
		return upperFirst(g.lookup(low, c))
	}
	panic("corpusgen: unknown template key {" + key + "}")
}

// para expands templates, joins them into one paragraph and wraps it, with
// the first line indented like a paragraph in a book.
func (g *gen) para(c ctx, templates ...string) string {
	parts := make([]string, len(templates))
	for i, t := range templates {
		parts[i] = sentence(g.expand(t, c))
		if !strings.ContainsAny(parts[i][len(parts[i])-1:], `.!?"`) {
			parts[i] += "."
		}
	}
	return wrap("  "+strings.Join(parts, " "), 72)
}

// line expands one template into a single unwrapped line.
func (g *gen) line(c ctx, template string) string {
	return sentence(g.expand(template, c))
}

// some returns n different templates from a pool, in pool order.
func (g *gen) some(n int, pool ...string) []string {
	keep := make([]bool, len(pool))
	for n > 0 {
		k := g.r.intn(len(pool))
		if !keep[k] {
			keep[k] = true
			n--
		}
	}
	var out []string
	for i, t := range pool {
		if keep[i] {
			out = append(out, t)
		}
	}
	return out
}

// sentence makes the first letter upper case, also after an opening quote.
func sentence(s string) string {
	if strings.HasPrefix(s, `"`) {
		return `"` + upperFirst(s[1:])
	}
	return upperFirst(s)
}

func upperFirst(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

func lowerFirst(s string) string {
	if s != "" && s[0] >= 'A' && s[0] <= 'Z' {
		return string(s[0]-'A'+'a') + s[1:]
	}
	return s
}

// title makes every word of s start with a capital, except small words.
func title(s string) string {
	w := strings.Fields(s)
	for i, x := range w {
		switch x {
		case "a", "an", "the", "of", "and", "with", "in", "on", "to", "by", "for", "at":
			if i > 0 {
				continue
			}
		}
		w[i] = upperFirst(x)
	}
	return strings.Join(w, " ")
}

func article(s string) string {
	if s != "" && strings.IndexByte("aeiouAEIOU", s[0]) >= 0 {
		return "an " + s
	}
	return "a " + s
}

// wrap breaks text into lines of at most width bytes, at spaces. Leading
// spaces (a paragraph indent) are kept on the first line.
func wrap(s string, width int) string {
	var b strings.Builder
	line := s[:len(s)-len(strings.TrimLeft(s, " "))]
	empty := true
	for _, w := range strings.Fields(s) {
		if !empty && len(line)+1+len(w) > width {
			b.WriteString(line)
			b.WriteByte('\n')
			line, empty = "", true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	b.WriteString(line)
	return b.String()
}

var small = []string{"zero", "one", "two", "three", "four", "five", "six",
	"seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
	"fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
var tens = []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty",
	"seventy", "eighty", "ninety"}

// spell writes a number from 0 to 999 in words: 42 -> "forty-two".
func spell(n int) string {
	switch {
	case n < 20:
		return small[n]
	case n < 100:
		if n%10 == 0 {
			return tens[n/10]
		}
		return tens[n/10] + "-" + small[n%10]
	case n%100 == 0:
		return small[n/100] + " hundred"
	default:
		return small[n/100] + " hundred and " + spell(n%100)
	}
}

// ordinal writes 1 -> "first", 23 -> "twenty-third" (up to 99).
func ordinal(n int) string {
	irregular := map[int]string{1: "first", 2: "second", 3: "third", 5: "fifth",
		8: "eighth", 9: "ninth", 12: "twelfth"}
	if s, ok := irregular[n]; ok {
		return s
	}
	if n > 20 && n%10 != 0 {
		return tens[n/10] + "-" + ordinal(n%10)
	}
	s := spell(n)
	if strings.HasSuffix(s, "y") {
		return s[:len(s)-1] + "ieth"
	}
	return s + "th"
}
