package corpusgen

import "strings"

// play is a short scene in play form: "MIRA: Good morning."
func (g *gen) play() string {
	c := ctx{}
	g.cast(c, "A", "B", "C")
	c["P"], c["P.his"], c["P.him"] = c["C"], c["C.his"], c["C.him"]
	g.scene(c)
	g.distinct(c, "food", "f", 1)
	g.distinct(c, "place", "p", 1)
	c["Where"] = upperFirst(c["A.place"])
	// A beat is a little exchange. "A:" and "B:" lines are spoken;
	// "[...]" lines are stage directions.
	beats := [][]string{
		g.pickBeat([]string{"B: Do you think it will <rain|snow> later?",
			"A: <My knee says yes, but the sky says no.|My cat thinks so. She has been under the bed all day.|I hope not. My washing is still out.>",
			"B: <Well, we shall see.|Then I will take my umbrella.|Let us hope for the best.>"},
			[]string{"B: Have you ever seen such {wx} weather?",
				"A: <Not since I was a child.|Only once, the year the river froze.|Never in all my days.>",
				"B: <Nor have I.|I hope it does not last.|Well, it makes a change.>"}),
		{"B: <Could I|May I> borrow your {tool}? Mine is <broken|lost|lent out>.",
			"A: <#Of course. It is just there, by the door.|You may, if you bring it back by {day}.|I lent it to {C} yesterday. You could ask {C.him}.>",
			"B: <#Thank you. You are very kind.|I will bring it back, I promise.|Then I will go and see {C} straight after this.>"},
		{"A: Did you hear about {C} the {C.job}?",
			"B: <No. What happened?|Not a word. Tell me!|Only a little. What was it?>",
			"A: {C.He} {news}.",
			"B: {react}"},
		{"B: <Something smells good in here.|What is that smell?|Is that {f1} I can smell?>",
			"A: <It is {f1}. Would you like some?|Only {f1}. Sit down and try some.|Yes, and there is plenty for two.>",
			"B: <Just a little, then.|I would love some.|I should not, but I will.>",
			"[{B} sits down by the window and eats.]",
			"B: <Nobody in {town0} makes {f1} like you do.|Wonderful! You must tell me how you make it.|Better than my grandmother's, and that is saying a lot.>"},
		g.pickBeat([]string{"B: I am worried about my {pet}, {petname}.",
			"A: Why? What is the matter?",
			"B: <It will not eat.|It sits and looks at the moon all night.|It has stopped chasing the hens.>",
			"A: <#Give it time. Animals know their own minds.|Try a little cheese. That works with mine.|Ask {C} the {C.job}. {C.He} knows all about animals.>",
			"B: <#You may be right.|I will try that tonight.|Thank you. I will.>"},
			[]string{"B: Have you seen my {pet}, {petname}? <It has been gone since {day}.|It ran off this morning.>",
				"A: <#I saw {a:pet} near {p1} this morning. Perhaps that was {petname}.|No, but I will keep my eyes open.>",
				"B: <#Then I will look there on the way home.|Thank you. If you see it, tell it to come home for supper.>"}),
		{"A: Are you going to the dance at {p1} on {day}?",
			"B: <I might, if my feet are up to it.|Only if you will dance with me.|I would not miss it for the world.>",
			"A: <Then I will see you there.|Then it is settled.|Good. Bring your fiddle.>",
			"[They both laugh.]"},
		{"[{C} comes in, out of breath.]",
			"C: <#Have you seen a {pet}? One ran off this way.|Is this where the meeting is?|Am I too late for the {f1}?>",
			"A: <#No, but sit down, {C}, and catch your breath.|There is no meeting here, but come in.|Not at all. There is plenty left.>",
			"C: <Thank you. What a {tod} I am having!|You are kind. Good {tod}, {B}.|I will only stay a minute.>"},
	}
	lines := []string{
		strings.ToUpper(g.expand("<a scene at {A.place}|a short play: {A} and {B}|{A.place} on {a:wx} {tod}>", c)),
		wrap(g.line(c, "[{Where}, <early one|late one|on a {wx}> {tod}. {A} is {A.doing}. {B} comes in.]"), 72),
	}
	say := func(t string) {
		if who, text, ok := strings.Cut(t, ": "); ok && len(who) == 1 {
			t = c[who+".UP"] + ": " + g.line(c, text)
		} else {
			t = g.line(c, t)
		}
		lines = append(lines, wrap(t, 72))
	}
	say("A: Good {tod}, {B}. <You are out early.|What brings you here?|Come in, come in.>")
	say("B: Good {tod}, {A}. <It is {a:wx} day, is it not?|I could not sleep, so I went for a walk.|I have come on an errand.>")
	for _, i := range g.order(len(beats), g.r.between(2, 4)) {
		g.relink()
		for _, t := range beats[i] {
			say(t)
		}
	}
	say("B: <Well, I must be off.|I had better go. The {tod} is getting on.|Thank you, {A}. I will see you soon.>")
	say("A: Goodbye, {B}. <Mind the puddles on the way home.|Give my love to {petname}.|Come again soon.>")
	say("[{B} goes out. {A} <goes back to {A.doing}|sits down and smiles|looks out of the window>.]")
	return strings.Join(lines, "\n")
}

// pickBeat chooses one of several versions of a beat.
func (g *gen) pickBeat(versions ...[]string) []string {
	return versions[g.r.intn(len(versions))]
}

// order returns n different numbers below max, in random order.
func (g *gen) order(max, n int) []int {
	p := make([]int, max)
	for i := range p {
		p[i] = i
	}
	for i := max - 1; i > 0; i-- {
		j := g.r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p[:n]
}

// shipLog is a ship's log with numbered days.
func (g *gen) shipLog() string {
	c := ctx{}
	g.cast(c, "A", "B", "C")
	g.scene(c)
	c["petname"] = g.pick(pets[0].names)
	c["ship"] = g.pick([]string{"Grey Heron", "Little Gull", "Morning Star", "Brave Otter", "Salt Rose", "Kittiwake", "Good Hope"})
	lines := []string{
		strings.ToUpper(g.expand("the log of the {ship}", c)),
		wrap(g.line(c, "Captain {A}, sailing from {town0} to {elsewhere}<, with {B} as mate and {C} as cook|, with a cargo of <cheese|wool|apples|flour> and a crew of <four|five|six>>."), 72),
	}
	days := g.r.between(4, 8)
	for d := 1; d <= days; d++ {
		g.relink()
		entry := "Day " + spell(d) + ". "
		switch {
		case d == days:
			entry += g.line(c, "land in sight at <dawn|noon|first light>. We came into {elsewhere} <by evening|in the afternoon|before dark>, safe and well.")
			if g.r.chance(50) {
				entry += " " + g.line(c, "<{C} says the first thing {C.he} wants is a bath.|The crew have gone to find {food}.|A good trip.>")
			}
		case d > 1 && g.r.chance(15):
			entry += g.line(c, "a storm in the night. We took in the sails and held on. <No harm done.|One rope broke, but {B} mended it.|Nobody slept.>")
		default:
			entry += g.expand("<Wind from the {dir}, <light|fresh|strong>.|<Light|Fresh|Strong> wind from the {dir}.|No wind at all until noon.>", c)
			for _, t := range g.some(g.r.between(2, 3),
				"<the sea was calm and the sky was clear|grey seas, and rain in the afternoon|a long swell from the west, and the ship rolled all night|fog until noon, then bright sun>",
				"we passed {island} <in the morning|at noon|before dark>",
				"saw <a whale far off to the east|three seals on a rock near the bow|a school of dolphins close by|a great flock of gulls over the mast|a big grey heron on a floating log>",
				"{B} caught <three|five|eleven|a dozen> fish, and {C} cooked them for supper",
				"{B} mended the <mainsail|rope ladder|little boat|old bucket|torn flag>",
				"we saw <a light|smoke|a sail> <on the horizon|far to the south>, <but it was gone by noon|and we waved|and {B} said it was a fishing boat from {town0}>",
				"we <put in at|anchored off> {island} for fresh water<, and {C} found <wild onions|a nest of eggs|a cave>|>",
				"<the ship's cat|our cat, {petname},> <caught a rat|slept in the captain's hat|fell into a bucket of water|would not come down from the mast>",
				"the stars were <#very bright|hidden by cloud> <tonight|all night>, and {A} <#steered by them|kept watch until dawn>",
				"the wind changed in the afternoon, and we had to <turn back a little|work hard all evening|wait for it to blow our way again>",
				"{A} <read|wrote letters|slept> <in the cabin|on deck> <all afternoon|after supper>",
				"{C} made {hotfood} to keep us warm",
				"the crew sang songs on deck until late",
				"<all well on board|everyone is tired, but cheerful|{C} says {C.his} feet are always wet>",
			) {
				entry += " " + g.line(c, t) + "."
			}
		}
		lines = append(lines, wrap(entry, 72))
	}
	return strings.Join(lines, "\n")
}

// diary is a child's diary over a few days in a row.
func (g *gen) diary() string {
	c := ctx{}
	g.cast(c, "A", "B", "C")
	c["P"], c["P.his"], c["P.him"] = c["C"], c["C.his"], c["C.him"]
	g.scene(c)
	age := g.r.between(8, 13)
	lines := []string{g.line(c, "from the diary of {A}, aged "+spell(age)+".")}
	wd := g.r.intn(7)
	date := g.r.between(1, 20)
	m := g.r.intn(12)
	month := g.list("month")[m]
	season := []string{"winter", "spring", "summer", "autumn"}[(m+1)%12/3]
	dayNames := g.list("day")
	for i := g.r.between(3, 6); i > 0; i-- {
		w := weathers[g.r.intn(len(weathers))]
		for !strings.Contains(strings.Join(w.seasons, " "), season) {
			w = weathers[g.r.intn(len(weathers))]
		}
		c["wx"], c["wxdetail"] = w.adj, g.pick(w.details)
		entry := dayNames[wd] + ", the " + ordinal(date) + " of " + month + "."
		for _, t := range g.some(g.r.between(2, 4),
			"it was {wx} all day<, and {wxdetail}|>",
			"today I <helped {B} at {B.place}|went fishing with {B} by the old bridge|read a book about ships|had a spelling test and got nine out of ten|fed the ducks on the pond with {B}|walked to {place} with my <mother|father|grandmother>>",
			"<Mother|Father|Grandmother> made <pea soup|fish stew|pancakes|carrot soup|baked potatoes|onion pie|mushroom soup|a big pie> for supper<, and I had two helpings|, but I was not very hungry|>",
			"{petname} <was sick on the rug|caught a mouse|stole a sausage|slept on my bed all afternoon|chased the letter carrier>",
			"tomorrow I will <go to the orchard|write a letter to my {A.kin}|build a den in the garden|try to be good|help at {place}>",
			"{C} the {C.job} {news}",
		) {
			entry += " " + g.line(c, t) + "."
		}
		lines = append(lines, wrap(entry, 72))
		wd = (wd + 1) % 7
		date++
	}
	return strings.Join(lines, "\n")
}

// fable is an animal fable with a moral.
func (g *gen) fable() string {
	c := ctx{}
	g.scene(c)
	// pair picks the two animals, X and Y, each from a list that suits
	// its part in the plot.
	pair := func(xs, ys string) {
		c["X"], c["Y"] = g.pick(strings.Fields(xs)), g.pick(strings.Fields(ys))
		for c["Y"] == c["X"] {
			c["Y"] = g.pick(strings.Fields(ys))
		}
		for _, k := range []string{"X", "Y"} {
			c[k+".he"], c[k+".him"], c[k+".his"] = "he", "him", "his"
			if g.r.chance(50) {
				c[k+".he"], c[k+".him"], c[k+".his"] = "she", "her", "her"
			}
		}
	}
	c["fruit"] = g.pick([]string{"apple", "nut", "pear", "plum", "acorn", "berry"})
	c["fruits"] = strings.TrimSuffix(c["fruit"], "y") + map[bool]string{true: "ies", false: "s"}[strings.HasSuffix(c["fruit"], "y")]
	c["where"] = g.pick([]string{"at the edge of the wood", "beside a wide river", "on a hill above the fields",
		"in a meadow full of flowers", "near an old stone wall", "under a great oak tree"})
	var ps [][]string
	var moral string
	switch g.r.intn(7) {
	case 0:
		pair("hare fox deer squirrel crow dog", "snail tortoise hedgehog frog ant badger duck")
		ps = [][]string{
			{"<once|long ago,> a {X} lived {where}",
				"the {X} was proud, and <liked to say|told everyone> that {X.he} was the <fastest|quickest> animal of all"},
			{`"<Nobody can beat me|Nobody is as fast as I am|I could win any race>," said the {X}. "<Not even you, {Y}.|Least of all you, {Y}.>"`},
			{`the {Y} was <small|slow|quiet>, but {Y.he} said, "Let us have a race to the <old oak tree|far side of the field|big grey stone>, and we shall see."`},
			{"the {X} laughed and <ran off at once|was gone in a flash>",
				"halfway there, {X.he} was so far ahead that {X.he} <lay down in the shade|stopped to eat some clover|sat down in the warm grass> and <fell asleep|forgot all about the race>"},
			{"the {Y} did not stop. <Step by step|Slowly but surely>, {Y.he} went on, past the {X}, all the way to the end",
				"when the {X} <woke up|looked up at last>, the sun was going down, and the {Y} was already <waiting|resting> at the finish"},
		}
		moral = "<slow and steady work goes further than quick words|do not boast before the race is run|a proud head sleeps while a patient foot walks>"
	case 1:
		pair("badger crow squirrel bear mouse goat", "hedgehog mouse deer duck hare owl")
		ps = [][]string{
			{"one autumn a {X} found a <tree|bush> full of {fruits}",
				"{X.he} ate and ate, and carried all the rest home, until {X.his} <home|den|nest> was full to the roof"},
			{"a <hungry|tired|thin> {Y} came by and asked for just one {fruit}"},
			{`"<Go away|Find your own|Not one>," said the {X}. "These are all mine."`},
			{"so the {Y} went on, and shared the little {Y.he} had with the other animals <of the wood|of the field|who were hungry>"},
			{"but the {fruits} in the home of the {X} went bad, one by one, and by winter {X.he} had nothing left",
				"cold and hungry, {X.he} had to knock on the doors of the others and ask for help"},
			{"they shared what they had with {X.him}, and the {X} was ashamed<, and never forgot it| of how {X.he} had behaved>"},
		}
		moral = "<keep what you need, and share what you can|a full store with no friends is an empty store|those who share in autumn eat in winter>"
	case 2:
		pair("bear fox badger owl heron deer", "mouse ant bee frog snail hedgehog")
		ps = [][]string{
			{"one day a {X} caught a {Y} <by the tail|in the long grass|under a leaf|as it crossed the path>"},
			{`"Please let me go," said the {Y}. "<One day I will help you, I promise.|I am too small to be worth eating, and one day I may be of use to you.>"`},
			{`the {X} laughed. "How could <you ever help me|a little thing like you help me>?" {X.he} said. But {X.he} was <not hungry|in a good mood>, so {X.he} let the {Y} go`},
			{"<a week|a month|not long> later, the {X} was <caught in a hunter's net|stuck fast in the mud|tangled in a bramble bush>, and could not get free",
				"{X.he} called and called, but nobody came, except the {Y}"},
			{"the {Y} <pulled|tugged|worked> all night, and fetched {Y.his} friends to help, and by morning the {X} was free"},
		}
		moral = "<no friend is too small to help|a kindness given is a kindness kept|never laugh at a promise, however small the one who makes it>"
	case 3:
		pair("crow owl heron squirrel", "fox badger mouse hedgehog goat")
		c["treat"] = g.pick([]string{"a piece of cheese", "a crust of bread", "a ripe plum", "a fat worm"})
		ps = [][]string{
			{"a {X} found {treat} and sat <on a high wall|on a rock|on a branch> to eat it",
				"a {Y} saw it and wanted it very much"},
			{`"Good {tod}, dear {X}," said the {Y}. "<How fine you look today!|What bright eyes you have!|What a fine coat you have!> <They say|Everyone says> your voice is the sweetest <in the wood|in all the land>. Will you sing for me?"`},
			{"the {X} was so pleased that {X.he} opened {X.his} mouth to sing, and <the treat|{X.his} supper> fell down",
				"the {Y} caught it and ran off"},
			{`"Thank you for the song," called the {Y}. "And <thank you for my supper|for the gift>!"`},
		}
		moral = "<beware of sweet words from a hungry mouth|those who praise you may want something from you|think before you open your mouth>"
	case 4:
		pair("goat deer badger fox bear", "goat deer badger fox bear")
		ps = [][]string{
			{"a narrow bridge crossed a deep, fast river, and it was only wide enough for one",
				"one {tod}, a {X} came to one end of the bridge, and a {Y} came to the other"},
			{"they met in the middle. <Neither would step back.|Each waited for the other to turn round.>"},
			{`"Go back," said the {X}. "I was here first."`, `"<No, I was here first|I am bigger than you|I am in a hurry>," said the {Y}. "You go back."`},
			{"they <pushed and shoved|argued and stamped> until the bridge <shook|creaked|swayed>, and <both of them fell|with a great splash they both fell> into the river"},
			{"<wet and cold|cold and cross>, they climbed out on the same bank they had started from, and both had to <begin|start> again"},
		}
		moral = "<give way a little, and both of you get home|a stubborn pair goes nowhere together|it is better to step back than to fall in>"
	case 5:
		pair("crow duck frog goat hedgehog", "owl heron deer squirrel bee")
		c["gift"] = g.pick([]string{"sing like", "fly like", "run like", "climb like"})
		ps = [][]string{
			{"there was once a {X} who <was never happy|always wished to be someone else>",
				"every day {X.he} watched the {Y} and thought, \"If only I could {gift} the {Y}, then I would be glad.\""},
			{"so the {X} tried. {X.He} tried <all morning|all day|for a week>, but {X.he} only <fell over|got tired|made the others laugh>"},
			{`at last the {Y} came and sat beside {X.him}. "Why are you so sad?" {Y.he} asked.`},
			{`"Because I cannot {gift} you," said the {X}.`, `"But you can do many things I cannot," said the {Y}. "<I wish I could|I have always wanted to> do what you do."`},
			{"the {X} had never thought of that, and from that day on, {X.he} was <glad to be a {X}|happy just as {X.he} was>"},
		}
		moral = "<be glad of what you are|every creature has its own gift|do not envy the gifts of others>"
	default:
		pair("hare fox frog crow goat duck deer", "ant bee squirrel mouse badger")
		ps = [][]string{
			{"all summer a {Y} worked hard, carrying {fruits} and dry grass to {Y.his} home",
				"the {X} lay in the sun <all day|from morning until night> and laughed"},
			{`"Why work on a day like this?" said the {X}. "<Come and play.|Come and lie in the sun.|The summer will last for ever.>"`,
				`"Winter is coming," said the {Y}. "<I am getting ready.|I must be ready when it comes.>"`},
			{"then winter came, with <snow and ice|wind and frost>",
				"the {X} was cold and hungry, and knocked at the door of the {Y}"},
			{"the {Y} let {X.him} in and shared {Y.his} food",
				"and the next summer, the {X} worked beside {Y.him} every day"},
		}
		moral = "<work in the sun, and you may rest in the snow|make ready today for the needs of tomorrow|play is sweet, but bread is sweeter in winter>"
	}
	lines := []string{title(g.expand("the {X} and the {Y}", c))}
	for _, p := range ps {
		lines = append(lines, g.para(c, p...))
	}
	lines = append(lines, "Moral: "+g.line(c, moral)+".")
	return strings.Join(lines, "\n")
}

// facts is a list of simple facts: about animals, numbers or the calendar.
func (g *gen) facts() string {
	c := ctx{}
	var lines []string
	switch g.r.intn(3) {
	case 0:
		lines = append(lines, title(g.expand("<facts about animals|some animals and their ways|what I know about animals>", c)))
		for _, i := range g.order(len(beasts), g.r.between(4, 7)) {
			b := beasts[i]
			c["n"], c["home"], c["food"], c["young"], c["sound"], c["trait"] = b.name, b.home, b.food, b.young, b.sound, b.trait
			c["legs"] = "has " + spell(b.legs) + " legs"
			if b.legs == 0 {
				c["legs"] = "has no legs at all"
			}
			s := []string{g.line(c, "<the {n} lives {home}|you can find the {n} {home}|{a:n} makes its home {home}>.")}
			for _, t := range g.some(g.r.between(2, 4),
				"it <eats|likes to eat|lives on> {food}",
				"a young {n} is called {young}",
				"the {n} makes {sound}",
				"the {n} {trait}",
				"the {n} {legs}") {
				s = append(s, g.line(c, t)+".")
			}
			lines = append(lines, wrap("- "+strings.Join(s, " "), 72))
		}
	case 1:
		lines = append(lines, title(g.expand("<number facts|sums to know|some facts about numbers>", c)))
		seen := map[string]bool{}
		for k := g.r.between(6, 10); k > 0; {
			a, b := g.r.between(1, 12), g.r.between(1, 12)
			var s string
			switch g.r.intn(5) {
			case 0:
				s = spell(a) + " and " + spell(b) + " make " + spell(a+b) + "."
			case 1:
				if a < b {
					a, b = b, a
				}
				s = spell(a) + " take away " + spell(b) + " leaves " + spell(a-b) + "."
			case 2:
				s = spell(a) + " times " + spell(b) + " is " + spell(a*b) + "."
			case 3:
				s = "half of " + spell(2*a) + " is " + spell(a) + "."
			default:
				n := g.r.between(2, 99)
				s = spell(n) + " comes after " + spell(n-1) + " and before " + spell(n+1) + "."
			}
			if !seen[s] {
				seen[s] = true
				lines = append(lines, "- "+upperFirst(s))
				k--
			}
		}
	default:
		lines = append(lines, title(g.expand("<facts about the year|the days and the months|the calendar>", c)))
		months := g.list("month")
		long := []int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
		dayNames := g.list("day")
		for _, k := range g.order(7, g.r.between(4, 7)) {
			var s string
			switch k {
			case 0, 1:
				m := g.r.intn(12)
				s = "there are " + spell(long[m]) + " days in " + months[m]
				if m == 1 {
					s += ", and twenty-nine in a leap year"
				}
			case 2:
				m := g.r.intn(11)
				s = months[m+1] + " comes after " + months[m]
			case 3:
				d := g.r.intn(6)
				s = dayNames[d+1] + " comes after " + dayNames[d]
			case 4:
				s = g.pick([]string{"there are seven days in a week", "there are twelve months in a year",
					"there are four seasons in a year", "a year has three hundred and sixty-five days"})
			case 5:
				m := g.r.intn(12)
				s = months[m] + " is the " + ordinal(m+1) + " month of the year"
			default:
				s = g.pick([]string{"in winter the nights are long and the days are short",
					"in summer the days are long and the evenings are light",
					"in spring the lambs are born and the trees come into leaf",
					"in autumn the leaves turn brown and the apples are picked"})
			}
			lines = append(lines, "- "+upperFirst(s)+".")
		}
	}
	return strings.Join(lines, "\n")
}
