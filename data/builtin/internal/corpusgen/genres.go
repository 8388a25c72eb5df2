package corpusgen

import (
	"strconv"
	"strings"
)

// Each genre method writes one document: a title line, then its lines,
// with no blank lines inside. Prose paragraphs start with a two-space
// indent.

// home is the invented town where most of the corpus takes place.
const home = "Pellbrook"

// cast picks n different people, gives each a trade, and records them in c
// under the keys "A", "B", ... with "A.he", "A.him", "A.his", "A.job",
// "A.place", "A.work", "A.doing", "A.adj" and "A.UP" (the name in capitals).
func (g *gen) cast(c ctx, keys ...string) {
	usedName := map[string]bool{}
	usedJob := map[int]bool{}
	for _, k := range keys {
		var p person
		for {
			p.she = g.r.chance(50)
			if p.she {
				p.name = g.pick(women)
			} else {
				p.name = g.pick(men)
			}
			if !usedName[p.name] {
				break
			}
		}
		usedName[p.name] = true
		j := g.r.intn(len(jobs))
		for usedJob[j] {
			j = (j + 1) % len(jobs)
		}
		usedJob[j] = true
		c[k] = p.name
		c[k+".UP"] = strings.ToUpper(p.name)
		c[k+".he"], c[k+".him"], c[k+".his"] = "he", "him", "his"
		if p.she {
			c[k+".he"], c[k+".him"], c[k+".his"] = "she", "her", "her"
		}
		c[k+".job"] = jobs[j].name
		c[k+".place"] = jobs[j].place
		c[k+".work"] = jobs[j].work
		c[k+".doing"] = jobs[j].doing
		c[k+".adj"] = g.word("adj", c)
		c[k+".kin"] = g.pick([]string{"cousin", "old friend", "uncle", "grandfather"})
		if p.she {
			c[k+".kin"] = g.pick([]string{"cousin", "old friend", "aunt", "grandmother"})
		}
	}
}

// scene sets the weather, season, day and a pet, shared by many genres.
func (g *gen) scene(c ctx) {
	w := weathers[g.r.intn(len(weathers))]
	c["town0"] = home
	c["wx"] = w.adj
	c["wxdetail"] = g.pick(w.details)
	c["wxdetail2"] = g.pick(w.details)
	for c["wxdetail2"] == c["wxdetail"] {
		c["wxdetail2"] = g.pick(w.details)
	}
	c["season"] = g.pick(w.seasons)
	c["month"] = g.pick(map[string][]string{
		"winter": {"December", "January", "February"},
		"spring": {"March", "April", "May"},
		"summer": {"June", "July", "August"},
		"autumn": {"September", "October", "November"},
	}[c["season"]])
	c["tod"] = g.word("tod", c)
	c["day"] = g.word("day", c)
	p := pets[g.r.intn(len(pets))]
	c["pet"] = p.kind
	c["petname"] = g.pick(p.names)
	c["elsewhere"] = g.word("town", c)
}

func (g *gen) doc(titleLine string, lines ...string) string {
	return titleLine + "\n" + strings.Join(lines, "\n")
}

// story is a short tale from Pellbrook with dialogue.
func (g *gen) story() string {
	c := ctx{}
	g.cast(c, "A", "B", "C")
	c["P"], c["P.his"], c["P.him"] = c["C"], c["C.his"], c["C.him"]
	g.scene(c)
	g.distinct(c, "place", "p", 3)
	opening := g.some(g.r.between(2, 3),
		"it was {a:wx} {tod} in {town0}, and {wxdetail}",
		"in the little town of {town0}, by the river, there lived {a:A.adj} {A.job} named {A}",
		"every day {A} {A.work}",
		"{A} lived in a {color} house not far from {p1}, with {a:pet} called {petname}",
		"{season} had come to {town0}, and {wxdetail2}",
		"{A} liked {food} more than anything, except perhaps a good long sleep",
	)
	paras := []string{g.para(c, opening...)}
	var t string
	switch g.r.intn(5) {
	case 0:
		t, paras = g.lostThing(c, paras)
	case 1:
		t, paras = g.visitor(c, paras)
	case 2:
		t, paras = g.fair(c, paras)
	case 3:
		t, paras = g.storm(c, paras)
	default:
		t, paras = g.mischief(c, paras)
	}
	return g.doc(title(g.expand(t, c)), paras...)
}

func (g *gen) lostThing(c ctx, paras []string) (string, []string) {
	c["obj"] = g.word("thing", c)
	c["spot1"], c["spot2"] = g.word("spot", c), g.word("spot", c)
	for c["spot2"] == c["spot1"] {
		c["spot2"] = g.word("spot", c)
	}
	paras = append(paras,
		g.para(c, "<one {day}|that {tod}|one {wx} {day}>, {A} <could not find {A.his} {obj}|went to get {A.his} {obj}, but it was gone>",
			"{A.he} looked {spot1}, and {A.he} looked {spot2}, but it was not there"),
		g.para(c, `"<Where is my {obj}|Where can my {obj} be|Where has my {obj} gone>?" {A} <asked|said to {petname} the {pet}>. "I had it <only yesterday|this very morning|a moment ago>."`),
		g.para(c, "so {A} <went|walked|hurried> to {B.place} to ask {B} the {B.job}, who was {B.doing}"),
		g.para(c, `"Good {tod}, {B}," said {A}. "Have you seen my {obj}?"`),
		g.para(c, `<"I have not," said {B}, "but I will help you look."|"Not today," said {B}, scratching {B.his} head. "Shall we look together?"|{B} put down {B.his} work. "Your {obj}? Come, we will find it," {B.he} said.>`),
		g.para(c, "they <searched|looked in> {p2} and {p3}, and they asked {C} the {C.job} too",
			"at last, <just as the sun was going down|after a long search|when they had almost given up>, they found it {hiding}"),
		g.para(c, `<"Well," laughed {B}, "that is a strange place for {a:obj}!"|"Of all the places!" cried {A}, and {B} laughed until {B.he} had to sit down.|"How did it get there?" asked {A}. Nobody knew, but {petname} the {pet} looked very pleased with itself.>`),
		g.para(c, "<{A} thanked {B} and gave {B.him} {gift}|that evening they ate {food} together and laughed about it|{A} invited {B} and {C} to supper, and they had {food} by the fire>",
			"<from that day on, {A} kept {A.his} {obj} on a hook by the door|and {A} never lost {A.his} {obj} again, or at least not that week|{A} said it was the best day {A.he} had had all {season}>"),
	)
	return "<The Lost {obj}|{A} and the {obj}|Where Is the {obj}?|The {obj} of {A} the {A.job}>", paras
}

func (g *gen) visitor(c ctx, paras []string) (string, []string) {
	g.distinct(c, "food", "f", 2)
	for c["p1"] == c["C.place"] || c["p2"] == c["C.place"] {
		g.distinct(c, "place", "p", 2)
	}
	paras = append(paras,
		g.para(c, "one {day}, <a cart came slowly down the road into {town0}, and on it sat {B}|a small boat sailed into the harbor of {town0}, and in it was {B}|a stranger in a {color} coat walked over the old bridge. It was {B}>, {A.his} {B.kin} from {elsewhere}"),
		g.para(c, `"{B}!" cried {A}. "<I did not know you were coming!|What a surprise!|You have come at last!>"`),
		g.para(c, `"I wanted to <surprise you|see you again|see {town0} once more>," said {B}, "and to <taste your {food}|hear all your news|walk by the river with you>."`),
		g.para(c, "the next day {A} showed {B} {p1}, {p2} and {C.place}",
			"at {C.place} they met {C} the {C.job}, who was {C.doing}",
			`"So this is your famous {B.kin}," said {C}. "Welcome to {town0}."`),
		g.para(c, "in the evening they ate {f1} and {f2} by the fire",
			"{B} told stories about {elsewhere}, where <the houses are painted pink|the river runs backwards once a year, or so they say|everyone keeps bees|the market is as big as a field|the wind never stops blowing>",
			"{A} laughed so much that {petname} the {pet} woke up and <stared at them|went to sleep again|wanted to join in>"),
		g.para(c, "<when {B} left <a week later|at the end of the week>, {B.he} promised to come back next {season}|{B} liked {town0} so much that {B.he} stayed until the end of the {season}|before {B} went home, {B.he} gave {A} {gift} and a hug>",
			`"<Write to me|Come and see me|Do not forget me>," said {B}. "<I will|Of course I will|Every week>," said {A}.`),
	)
	return "<The Visitor|A Visitor for {A}|{B} Comes to {town0}|A Guest from {elsewhere}>", paras
}

func (g *gen) fair(c ctx, paras []string) (string, []string) {
	c["prize"] = g.pick([]string{"the biggest pumpkin", "the best plum jam", "the finest loaf",
		"the fastest duck", "the best song", "the tallest sunflower", "the best cheese", "the nicest hat"})
	c["judge"] = g.pick([]string{"old Hilda Marsh", "old Mrs Tumble", "the mayor's aunt", "old Mother Kettering"})
	win := g.r.chance(50)
	paras = append(paras,
		g.para(c, "every {season}, {town0} held a fair on the village green",
			"this year there was a prize for {prize}, and {A} wanted very much to win it"),
		g.para(c, "for <three days|a whole week|many days> {A.he} worked <from morning until night|every spare hour|in secret>",
			"{C} the {C.job} came by and <said it looked very good|asked what {A.he} was doing|brought {A.him} {gift} for luck>"),
		g.para(c, "but on the morning of the fair, <{A} slipped in the mud by the well|the wind blew {A.his} hat into the river|a crow flew off with the ribbon from {A.his} basket|the cart lost a wheel on the old bridge>",
			`"Oh no," said {A}. "<Now I shall be late!|What a start to the day!|Of all the mornings!>"`),
		g.para(c, "{B} the {B.job} <helped {A.him} up and brushed {A.him} down|ran to help|fetched a rope and a ladder>, and they reached the green just in time"),
	)
	if win {
		paras = append(paras,
			g.para(c, "the judge was {judge} of {elsewhere}, who <looked|walked slowly along the tables and looked> at everything twice",
				"at last she said, \"The prize for {prize} goes to {A} of {town0}!\""),
			g.para(c, "everyone clapped, and {A} went as red as a <beetroot|cherry|poppy>",
				`"I cannot believe it," {A.he} said. "<Thank you, {B}.|I must thank {petname}, too.|Next year I will try even harder.>"`))
	} else {
		paras = append(paras,
			g.para(c, "{A} did not win. The prize for {prize} went to {C}, who <grinned from ear to ear|did a little dance|had won it twice before>",
				`"Never mind," said {B}. "<Yours was the best one to me.|There is always next year.|Let us go and find some {food}.>"`),
			g.para(c, "and {A} decided that a fair with friends was better than any prize"))
	}
	return "<The Fair|{A} at the Fair|The Prize for {prize}|A Day at the {season} Fair>", paras
}

func (g *gen) storm(c ctx, paras []string) (string, []string) {
	paras = append(paras,
		g.para(c, "<in the afternoon|after lunch|towards evening>, dark clouds came rolling over the hills",
			"the wind grew strong, and <heavy rain began to fall|the first drops of rain hit the windows|the river began to rise>"),
		g.para(c, "{A} hurried <out|down the lane> to <bring the washing in|shut the hens in their house|tie up the boat|close the shutters>",
			"on the way {A.he} met {B} the {B.job}, who was trying to <hold a door shut in the wind|chase {B.his} hat down the street|carry three sacks at once|bring the sheep down from the hill>"),
		g.para(c, `"{A}!" called {B}. "<Can you help me?|Quick, take this end!|Hold on tight!>"`,
			`"<I am coming!|Right behind you!|I have got it!>" shouted {A} over the noise of the storm.`),
		g.para(c, "together they <worked until the job was done|got everything safely inside|tied everything down with rope>, and then they ran to {p1} to wait for the storm to pass",
			"{C} was there already, with {hotfood} on the stove"),
		g.para(c, "<by night the storm had passed|the storm blew all night, but by morning it was gone|the rain stopped just before midnight>",
			"in the morning the whole town came out to <pick up the branches|mend the fences|sweep the lanes|look at the river>",
			"<the sky was clean and bright, and|the air smelled fresh, and|there was a rainbow over the hills, and> {A} felt <glad|lucky|happy> to live in {town0}"),
	)
	return "<The Storm|A Wild {day}|The Night of the Storm|Wind over {town0}>", paras
}

func (g *gen) mischief(c ctx, paras []string) (string, []string) {
	g.relink()
	paras = append(paras,
		g.para(c, "{petname} the {pet} was a clever animal, and more than a little naughty",
			"one {tod}, {petname} <slipped out through the gate|pushed open the kitchen door|jumped over the wall> and ran off down the lane"),
		g.para(c, `"{petname}! Come back!" called {A}, and {A.he} ran after it, past {p1} and down towards the river.`),
		g.para(c, "{petname} ran straight into {B.place}, where {B} the {B.job} was {B.doing}",
			"<#a whole tray of buns fell on the floor|a bucket of water went over|baskets went flying>, and {B} sat down with a bump"),
		g.para(c, `"Is this your {pet}, {A}?" asked {B}, <#picking a crumb out of {B.his} hair|wiping water from {B.his} eyes|trying not to laugh>.`,
			`"I am so sorry," said {A}. "<I will help you clean up.|It will not happen again.|{petname} is not usually like this.>"`),
		g.para(c, "<in the end|after a long chase>, {C} the {C.job} caught {petname} <with a piece of cheese|in a fishing net|behind {p3}>",
			"<the naughty {pet}|{petname}> looked <not sorry at all|very pleased with itself|a little ashamed>"),
		g.para(c, "<that evening|the next day> {A} brought {B} {gift}, and they all agreed it had been the most exciting {day} in {town0} for a long time"),
	)
	return "<{petname} the {pet}|The Naughty {pet}|{A} and {petname}|The Chase>", paras
}

// letter is a letter between two friends.
func (g *gen) letter() string {
	c := ctx{}
	g.cast(c, "A", "B", "C")
	c["P"], c["P.his"], c["P.him"] = c["C"], c["C.his"], c["C.him"]
	g.scene(c)
	from := home
	if g.r.chance(30) {
		from = c["elsewhere"]
		c["elsewhere"] = home
	}
	c["from"] = from
	date := from + ", the " + ordinal(g.r.between(1, 28)) + " of " + c["month"]
	body := []string{date, g.line(c, "Dear {B},")}
	body = append(body, g.para(c, g.some(2,
		"thank you for your letter. It came on {day}, and I read it twice by the fire",
		"your letter made me laugh so much that {petname} woke up",
		"I am sitting by the window with a cup of tea, and I thought of you",
		"I hope this letter finds you well, and {petname} too",
		"it has been far too long since I wrote to you, and I am sorry",
		"I have so much to tell you that I hardly know where to start")...))
	body = append(body, g.para(c, g.some(g.r.between(2, 4),
		"here in {from} it was {wx} all week, and {wxdetail}",
		"my {veg} are coming up well, but the {pest} have eaten half of the {veg}",
		"the {flower} by the door are out at last, and they look lovely",
		"{bird} has come to live in the old apple tree",
		"my {pet} {petname} <sleeps all day by the stove|has learned to open the gate|follows me everywhere|is getting fat on crumbs>",
		"I have been busy at {A.place}, where I <help out|work> most days now",
		"the river has been <high|low|very full> this {season}, and the ducks are <delighted|cross|everywhere>",
		"I have been learning to <play the fiddle|knit|bake bread|swim>, and I am getting <better|a little better|no better at all>",
		"we had a <dance|supper|bonfire> at {place} on {day}, and <everyone came|it went on until midnight|it rained, but nobody minded>",
		"{C} and I went <fishing|walking in the hills|picking blackberries> <on Sunday|last week>, and <caught nothing but a cold|came home with full baskets|got lost, but only a little>")...))
	body = append(body, g.para(c,
		"<you will never guess what happened last {day}|here is some news for you|I must tell you about {C}>",
		"{C} the {C.job} {news}",
		`<when I heard, I said, "{react}"|I laughed all evening|the whole town is still talking about it>`))
	body = append(body, g.para(c, g.some(2,
		"how is everything in {elsewhere}? Is it {wx} there too?",
		"do you still <walk by the river every morning|sing in the evenings|keep your bees|make that good {food}>?",
		"please write soon and tell me all your news",
		"if the roads are good, I will come and see you <soon|before the end of the {season}|after the fair>, and I will bring {gift}",
		"give my love to everyone in {elsewhere}",
		"tell me, is the old inn by the market still open?",
		"I am sending you {gift} with the letter carrier. I hope it gets there in one piece")...))
	closing := g.pick([]string{"With love,", "Your friend,", "Yours truly,", "Warm wishes,", "Ever yours,"})
	body = append(body, closing, c["A"])
	if g.r.chance(35) {
		body = append(body, g.line(c, "P.S. <{C} says hello.|{petname} sends a wag and a kiss.|Do not forget to write!|I have put a pressed flower in this letter.>"))
	}
	return strings.Join(body, "\n")
}

// dish is a kind of dish with its method. Ingredients and steps are
// templates. A flavor is written "Title|ingredient line|name in the steps".
type dish struct {
	kinds   []string
	serves  int
	mins    []string
	basics  []string // always needed
	flavors []string // one is picked, and named in the title
	steps   []string
}

var dishes = []dish{
	{[]string{"cake", "loaf", "tart", "sponge"}, 8, []string{"thirty", "forty", "forty-five", "fifty"},
		[]string{"<two cups|two big cups|a pound> of flour", "<a cup|half a cup> of <sugar|brown sugar>",
			"<three|four> eggs", "<half a cup|a block> of <soft |>butter", "a pinch of salt"},
		[]string{"Plum|six ripe plums|plums", "Pear|four pears|pears", "Apple|three sour apples|apples",
			"Cherry|a bowl of cherries|cherries", "Honey|half a cup of honey|honey",
			"Ginger|a thumb of fresh ginger|ginger", "Lemon|two lemons|lemons", "Walnut|a handful of walnuts|walnuts"},
		[]string{
			"<warm the oven until it is <hot|quite hot>|light the oven and let it get hot> and butter a <round|deep|square> tin",
			"<beat|mix|cream> the butter and the sugar together until they are <pale and soft|light and fluffy|smooth>",
			"add the eggs one at a time, <beating well after each one|and beat hard|and do not rush>",
			"<stir|fold|sift> in the flour and the salt <gently|slowly|with a wooden spoon>",
			"<fold in|add|stir in> the {flavor} <and a little milk|and stir once more|until all is mixed|and taste a little, just to be sure>",
			"pour the mixture into the tin and bake it for {mins} minutes, until it is <golden|brown on top|firm in the middle>",
			"let it cool <on the window sill|for an hour|before you cut it>, <or it will break|if you can wait that long|and then call everyone in>"}},
	{[]string{"soup", "stew", "pottage", "broth"}, 4, []string{"twenty", "thirty", "forty"},
		[]string{"a <knob|lump> of butter", "<two|three> onions", "<four|five> cups of water", "a <spoon|pinch> of salt", "some pepper"},
		[]string{"Carrot|six carrots|carrots", "Leek|three leeks|leeks", "Pea|two cups of peas|peas",
			"Potato|five potatoes|potatoes", "Mushroom|a basket of mushrooms|mushrooms",
			"Bean|two cups of beans|beans", "Fish|two fresh fish from the harbor|fish", "Turnip|four small turnips|turnips"},
		[]string{
			"<chop|cut> the onions and the {flavor} into <small|little|thin> pieces",
			"melt the butter in a <big|heavy|deep> pot over a <low|gentle> fire",
			"cook the onions <slowly|for a while|gently> until they are <soft and sweet|golden|clear>",
			"add the {flavor} and <stir them round in the butter|cook them for a few minutes|let them sizzle a little>",
			"pour in the water and let it <bubble|simmer> <gently|slowly|quietly> for {mins} minutes",
			"add the salt and the pepper, and <taste it to see if it needs more|stir it well|let it rest for a minute>",
			"serve it hot, with <fresh bread|a wedge of cheese|baked potatoes|a spoon of cream> <on the side|and a good appetite>"}},
	{[]string{"pancakes", "fritters", "griddle cakes"}, 6, []string{"two", "three", "four"},
		[]string{"a cup and a half of flour", "a cup of milk", "<two|three> eggs", "a spoon of sugar", "a little butter"},
		[]string{"Honey|a pot of honey|honey", "Apple|two apples, grated|apples",
			"Cinnamon|a spoon of cinnamon|cinnamon", "Raisin|a handful of raisins|raisins",
			"Cherry|a cup of cherries|cherries", "Oat|a cup of oats|oats"},
		[]string{
			"<mix|put> the flour and the sugar <in|into> a <big|wide> bowl",
			"make a hole in the middle and break in the eggs",
			"pour in the milk a little at a time and <stir|beat> until it is smooth",
			"add the {flavor} and stir <once more|well|until there are no lumps>",
			"heat a little butter in a <flat pan|heavy pan> <until it sizzles|over the fire>",
			"cook them for {mins} minutes, until they are brown <underneath|on both sides|at the edges>",
			"eat them warm, with <a cup of tea|a glass of milk|a little more sugar|a spoon of jam>"}},
	{[]string{"jam", "jelly", "preserve"}, 12, []string{"twenty", "twenty-five", "thirty"},
		[]string{"<two|three> pounds of sugar", "the juice of a lemon", "<six|eight> clean jars with lids", "a little water"},
		[]string{"Plum|three pounds of plums|plums", "Blackberry|a big bowl of blackberries|blackberries",
			"Strawberry|three pounds of strawberries|strawberries", "Apricot|three pounds of apricots|apricots",
			"Gooseberry|two baskets of gooseberries|gooseberries"},
		[]string{
			"wash the {flavor} and <take out the stones|pick out any leaves|cut away any bad bits>",
			"put them in a <big|wide|heavy> pan with a little water",
			"cook them <gently|slowly> until they are soft",
			"add the sugar and the lemon juice and stir until the sugar is gone",
			"let it boil <hard|fast> for {mins} minutes, <stirring|and stir> <all the time|now and then> so it does not burn",
			"pour it into the <warm|clean> jars and put on the lids",
			"<keep|store> the jars in a <cool|dark|dry> place, <and open one on a winter morning|and give one to a friend|until you need them>"}},
	{[]string{"porridge", "pudding"}, 2, []string{"ten", "fifteen", "twenty"},
		[]string{"a cup of <oats|barley>", "<two|three> cups of milk", "a pinch of salt"},
		[]string{"Honey|a spoon of honey|honey", "Apple|an apple, cut small|apple", "Plum|a few stewed plums|plums",
			"Nutmeg|a little nutmeg|nutmeg", "Raisin|a handful of raisins|raisins"},
		[]string{
			"put the <oats|grain> and the milk in a pot <the night before|in the morning>",
			"<warm|heat> it <slowly|gently> over a <low|small> fire",
			"stir it <all the time|often|with a wooden spoon>, or it will stick",
			"after {mins} minutes, add the salt and the {flavor}",
			"<serve it|eat it> <at once|in a warm bowl|by the fire>, <on a cold morning|before work|with a little cream>"}},
}

// recipe is a recipe with a list of things needed and numbered steps.
func (g *gen) recipe() string {
	c := ctx{}
	g.cast(c, "A")
	c["season"] = g.pick([]string{"spring", "summer", "autumn", "winter"})
	c["elsewhere"] = g.word("town", c)
	c["wx"] = weathers[g.r.intn(len(weathers))].adj
	c["pet"] = pets[g.r.intn(len(pets))].kind
	d := dishes[g.r.intn(len(dishes))]
	fl := strings.Split(g.pick(d.flavors), "|")
	c["flavor"] = fl[2]
	c["mins"] = g.pick(d.mins)
	name := g.expand("<{A}'s|{A.adj}|{season}|Harbor|Sunday|Pellbrook|old {elsewhere}|easy|market day> "+fl[0]+" "+g.pick(d.kinds), c)
	lines := []string{strings.ToUpper(name)}
	lines = append(lines, g.line(c, "<a recipe from {A} the {A.job}|as made by {A} the {A.job}|from the kitchen of {A}>, of "+home+"."))
	if g.r.chance(50) {
		lines = append(lines, wrap(g.line(c, "<my <grandmother|mother|father|aunt> made this every {season}|this is the one everybody asks for at the fair|I learned this from a cook in {elsewhere}|it is quick, and it is very good|this is best made on a {wx} day>."), 72))
	}
	c["n"] = spell(d.serves - g.r.intn(2))
	lines = append(lines, g.expand("<Serves|Enough for|Feeds> {n}.", c), "You will need:")
	for _, n := range append(append([]string{}, d.basics...), fl[1]) {
		lines = append(lines, "- "+g.expand(n, c))
	}
	lines = append(lines, g.pick([]string{"Method:", "What to do:", "Method:"}))
	for i, s := range d.steps {
		lines = append(lines, wrap(strconv.Itoa(i+1)+". "+g.line(c, s)+".", 72))
	}
	if g.r.chance(60) {
		lines = append(lines, wrap(g.line(c, "a tip: <if you have no {flavor}, use whatever the garden gives you|it is even better the next day|children love to help with the stirring|keep some back for a friend|{A} says it tastes best on a {season} evening|do not leave the kitchen while it cooks, or {a:pet} may get there first>."), 72))
	}
	return strings.Join(lines, "\n")
}

// Rhyming nouns of one syllable, for the poems: all places, or things
// one can be by, go to or come from.
var rhymes = [][]string{
	{"sea", "tree", "quay"},
	{"hill", "mill", "sill"},
	{"lane", "plain"},
	{"shore", "door", "moor"},
	{"shed", "bed"},
	{"wall", "hall", "stall"},
	{"boat", "moat"},
	{"well", "dell"},
	{"brook", "nook"},
	{"ridge", "bridge"},
	{"pool", "school"},
	{"street", "wheat"},
	{"rock", "dock"},
	{"glen", "pen"},
	{"sand", "land"},
	{"hay", "bay"},
	{"ground", "mound"},
	{"light", "night"},
}

// poem is a short rhyming poem of quatrains (two couplets each), or a
// counting rhyme. Every line has eight syllables and ends on a rhyme.
func (g *gen) poem() string {
	c := ctx{}
	if g.r.chance(20) {
		return g.countingRhyme(c)
	}
	forms := []string{
		"<and|so|now> the {one} {beast} <sits|waits|sleeps|dreams> <by|near> the {r}",
		"I <saw|heard|met> {a:one} {beast} <by|near> the {r}",
		"the <wind is cold|rain is soft|sun is warm|moon is bright> upon the {r}",
		"we <sing|walk|sit|play> all day down by the {r}",
		"come out and <dance|sing|play> down by the {r}",
		"the {one} {beast}s <go|run|climb> up to the {r}",
		"<my|your|our> {one} {beast} has <gone|run|come> to the {r}",
		"come home, {one} {beast}, home to the {r}",
		"<the {one}|{a:one}> {beast} <looks|runs|peeps> out from the {r}",
	}
	var lines []string
	first := ""
	for s := g.r.between(2, 4); s > 0; s-- {
		for couplet := 0; couplet < 2; couplet++ {
			set := rhymes[g.r.intn(len(rhymes))]
			i := g.r.intn(len(set))
			j := (i + 1 + g.r.intn(len(set)-1)) % len(set)
			if first == "" {
				first = set[i]
			}
			for k, r := range []string{set[i], set[j]} {
				c["r"] = r
				c["one"] = g.pick([]string{"old", "small", "grey", "brown", "wise", "shy", "bold", "young", "red", "black", "white"})
				c["beast"] = g.pick([]string{"cat", "owl", "goat", "fox", "hen", "crow", "dog", "mouse", "duck", "frog"})
				l := g.line(c, g.pick(forms))
				if k == 0 {
					l += ","
				} else {
					l += g.pick([]string{".", ".", "!"})
				}
				lines = append(lines, l)
			}
		}
	}
	c["r"] = first
	return g.doc(title(g.expand("<A Song of the {r}|The {r}|Down by the {r}|A Rhyme of the {r}|Verses for the {r}>", c)), lines...)
}

// countingRhyme counts up or down with spelled-out numbers.
func (g *gen) countingRhyme(c ctx) string {
	c["animal"] = g.pick([]string{"hen", "duck", "frog", "mouse", "goat", "crow", "owl", "cat"})
	c["place"] = g.pick([]string{"barn", "pond", "lane", "tree", "boat", "field", "wall", "shed"})
	c["verb"] = g.pick([]string{"sat", "danced", "slept", "sang", "played", "hid"})
	c["prep"] = g.pick([]string{"in", "by", "near"})
	n := g.r.between(4, 10)
	down := g.r.chance(50)
	var lines []string
	for i := 1; i <= n; i++ {
		k := i
		if down {
			k = n + 1 - i
		}
		c["n"], c["s"] = spell(k), c["animal"]+"s"
		if k == 1 {
			c["s"] = c["animal"]
		}
		lines = append(lines, g.line(c, "{n} little {s} {verb} {prep} the {place},"))
		if down {
			lines = append(lines, g.line(c, "<one went home for tea|one ran off to play|one went far away|one fell fast asleep>."))
		} else {
			lines = append(lines, g.line(c, "<along came another|one more came to play|and then there came one more|and the sun was on the {place}>."))
		}
	}
	c["n"], c["animal"] = upperFirst(spell(n)), c["animal"]+"s"
	lines = append(lines, g.line(c, "<and that is the end of the {animal}|and so goodnight to all the {animal}|and that is the song of the {animal}>!"))
	return g.doc(title(g.expand("<Counting {animal}|The {animal} in the {place}|{n} Little {animal}>", c)), lines...)
}
