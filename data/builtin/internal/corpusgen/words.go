package corpusgen

// The people, places, weather and word lists of the corpus. Everything here
// is invented for tinygpt. The vocabulary is kept small on purpose (around
// a thousand distinct words), so that a tiny model can learn it.

// person is one inhabitant of the town of Pellbrook.
type person struct {
	name string
	she  bool
}

var women = []string{"Mira", "Ada", "Nell", "Lina", "Rosa", "Greta", "June",
	"Maud", "Olive", "Tess", "Wren", "Elsa", "Hattie", "Ivy", "Lottie", "Bess"}

var men = []string{"Tom", "Ben", "Otto", "Pip", "Hugo", "Finn", "Ivo", "Kit",
	"Lars", "Ned", "Sam", "Abel", "Jonah", "Rolf", "Milo", "Wim"}

// job is a trade with its workplace, a sentence ending about the daily work
// (past tense) and what someone of that trade might be busy doing.
type job struct{ name, place, work, doing string }

var jobs = []job{
	{"baker", "the bakery", "baked bread before the sun came up", "kneading dough"},
	{"miller", "the mill", "ground wheat and barley into flour", "carrying sacks of flour"},
	{"fisher", "the harbor", "rowed out into the bay to catch fish", "mending a net"},
	{"teacher", "the school", "taught the children to read and to count", "writing sums on the board"},
	{"potter", "the pottery by the river", "made bowls and jugs from red clay", "shaping a jug on the wheel"},
	{"weaver", "the weaving shed", "wove blankets of blue and yellow wool", "sorting balls of wool"},
	{"farmer", "the farm on the hill", "milked the cows and fed the hens", "mending a gate"},
	{"carpenter", "the workshop", "made chairs, tables and doors", "sanding a new door"},
	{"tailor", "the tailor's shop", "sewed coats and mended trousers", "threading a needle"},
	{"beekeeper", "the hives behind the orchard", "looked after forty hives of bees", "filling jars with honey"},
	{"smith", "the forge", "made horseshoes and nails at the forge", "hammering a horseshoe"},
	{"gardener", "the walled garden", "grew beans, leeks and roses", "weeding the beans"},
	{"librarian", "the library", "kept the books in good order", "sorting a pile of books"},
	{"lamplighter", "the clock tower", "lit the lamps in the streets when it grew dark", "polishing a lamp"},
	{"cheesemaker", "the cheese shop", "made round yellow cheeses", "turning the cheeses"},
	{"clockmaker", "the clock shop", "mended clocks and watches", "oiling a tiny wheel"},
	{"shepherd", "the high pasture", "watched the sheep on the hills", "counting the sheep"},
	{"letter carrier", "the post office", "carried letters to every house in town", "sorting the letters"},
}

// weather is a kind of day, with details that fit it and the seasons in
// which it can happen.
type weather struct {
	adj     string
	details []string
	seasons []string
}

var weathers = []weather{
	{"rainy", []string{"the rain tapped softly on the roofs", "the lanes were full of puddles",
		"water ran down the gutters and into the river"}, []string{"spring", "summer", "autumn"}},
	{"windy", []string{"the wind rattled the shutters", "leaves went dancing down the lanes",
		"the washing flapped on every line"}, []string{"spring", "autumn", "winter"}},
	{"foggy", []string{"a thick fog hung over the harbor", "the boats in the bay were hidden in the mist",
		"nobody could see the far end of the bridge"}, []string{"autumn", "winter"}},
	{"sunny", []string{"the sun shone on the river", "the cats slept on the warm walls",
		"the whole town smelled of cut grass"}, []string{"spring", "summer"}},
	{"cold", []string{"frost lay white on the fields", "smoke rose straight up from every chimney",
		"the duck pond had a thin skin of ice"}, []string{"autumn", "winter"}},
	{"snowy", []string{"snow lay soft and deep on the hills", "the children were sliding down the lane on trays",
		"the roofs were white and the chimneys were busy"}, []string{"winter"}},
	{"grey", []string{"low clouds sat on the hills", "the river was as grey as a slate",
		"everything was quiet and still"}, []string{"spring", "autumn", "winter"}},
	{"bright", []string{"the sky was clear and blue", "the bells of the clock tower rang out over the fields",
		"every window in the town was open"}, []string{"spring", "summer", "autumn"}},
}

// pet is an animal someone in town keeps, with names that suit it.
type pet struct {
	kind  string
	names []string
}

var pets = []pet{
	{"cat", []string{"Pepper", "Biscuit", "Moss", "Sooty", "Marmalade"}},
	{"dog", []string{"Bramble", "Rufus", "Nutmeg", "Patch", "Bonnie"}},
	{"goat", []string{"Clover", "Buttons", "Hazel", "Old Bill"}},
	{"duck", []string{"Puddle", "Dabble", "Captain"}},
	{"hen", []string{"Dotty", "Speckle", "Mrs Feather"}},
	{"donkey", []string{"Thistle", "Barnaby", "Socks"}},
}

// beast is an animal for the fables and the facts.
type beast struct {
	name, home, food, young, sound, trait string
	legs                                  int
}

var beasts = []beast{
	{"fox", "in a den under the roots of a tree", "mice, beetles and berries", "a cub", "a sharp bark", "is quick and clever", 4},
	{"owl", "in a hollow tree", "mice and moths", "an owlet", "a soft hoot", "can turn its head a long way round", 2},
	{"hedgehog", "under hedges and in piles of leaves", "worms, slugs and beetles", "a hoglet", "a little snuffle", "rolls into a ball of spines when it is afraid", 4},
	{"badger", "in a sett deep under the ground", "worms, roots and fruit", "a cub", "a low grunt", "keeps its home very clean", 4},
	{"hare", "in a shallow dip in an open field", "grass and herbs", "a leveret", "almost no sound at all", "can run faster than a horse for a short way", 4},
	{"mouse", "in a small nest of grass", "seeds and crumbs", "a pup", "a tiny squeak", "can squeeze through a very small hole", 4},
	{"crow", "in a nest of sticks high in a tree", "almost anything it can find", "a chick", "a loud caw", "can remember a face for years", 2},
	{"frog", "near ponds and wet ditches", "flies and snails", "a tadpole", "a deep croak", "breathes through its skin as well as its mouth", 4},
	{"goat", "on farms and rocky hills", "grass, leaves and sometimes washing", "a kid", "a long maa", "can climb where no cow would dare", 4},
	{"duck", "on ponds and rivers", "weeds, seeds and little water creatures", "a duckling", "a loud quack", "has feathers that keep out the water", 2},
	{"bee", "in a hive with thousands of others", "nectar from flowers", "a larva", "a busy hum", "dances to tell the others where the flowers are", 6},
	{"snail", "in damp and shady places", "leaves and soft plants", "a hatchling", "no sound at all", "carries its house on its back", 0},
	{"deer", "in the woods and on the edges of fields", "grass, leaves and acorns", "a fawn", "a short bark", "can hear a twig snap far away", 4},
	{"squirrel", "in a nest of twigs called a drey", "nuts and seeds", "a kit", "a chattering call", "buries nuts and forgets where some of them are", 4},
	{"bear", "in a cave in the mountains", "berries, fish and honey", "a cub", "a deep growl", "sleeps for most of the winter", 4},
	{"tortoise", "in warm gardens and dry hills", "leaves and flowers", "a hatchling", "a small hiss", "can live for more than a hundred years", 4},
	{"heron", "by rivers and marshes", "fish and frogs", "a chick", "a harsh croak", "can stand still for a very long time", 2},
	{"ant", "in a nest under the ground", "seeds and sweet things", "a larva", "no sound we can hear", "can carry much more than its own weight", 6},
}

// vocabulary returns the word lists used by the templates. An entry may
// itself be a template.
func vocabulary() map[string][]string {
	return map[string][]string{
		"town": {"Marrowby", "Fennick", "Oldwater", "Hollin Cross", "Saltmere", "Briar End"},
		"place": {"the bakery", "the mill", "the harbor", "the market", "the old bridge",
			"the school", "the library", "the orchard", "the post office", "the Blue Lantern Inn",
			"the village green", "the well", "the clock tower", "the duck pond", "the boat shed",
			"the cheese shop"},
		"day":   {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"},
		"month": {"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"},
		"tod":   {"morning", "afternoon", "evening"},
		"color": {"red", "blue", "green", "yellow", "brown", "grey", "white", "black"},
		"food": {"fresh bread", "plum jam", "pea soup", "honey cake", "fish stew", "apple pie",
			"barley porridge", "warm pancakes", "pear tart", "carrot soup", "ginger biscuits",
			"bread and cheese", "baked potatoes", "cherry buns", "onion pie", "mushroom soup"},
		"gift": {"a jar of plum jam", "a loaf of fresh bread", "a pot of honey", "a basket of pears",
			"a bunch of flowers", "six brown eggs", "a wedge of cheese", "a bag of ginger biscuits"},
		"thing": {"kettle", "red scarf", "brass key", "blue hat", "pair of spectacles", "silver spoon",
			"little bell", "book of songs", "wooden whistle", "map of the hills", "green umbrella",
			"ball of yarn", "pocket watch", "lantern", "left boot"},
		"spot": {"under the bed", "behind the door", "in every drawer", "all over the garden",
			"by the window", "inside the cupboard", "under the stairs", "in the shed"},
		"hiding": {"under the hen, who was sitting on it like an egg", "in the bread bin, between two loaves",
			"on the roof of the shed", "inside an old boot", "behind the clock on the wall",
			"in the goat's hay", "in the pocket of {A.his} own coat", "in the flour sack at the mill",
			"in a flower pot by the gate", "in the basket of the letter carrier's bicycle"},
		"hotfood": {"a pot of pea soup", "a pot of fish stew", "a kettle of hot tea", "a pan of warm pancakes",
			"a pot of carrot soup", "a pot of barley porridge"},
		"island": {"Gull Island", "the Long Rock", "Seal Point", "Crab Island", "the Twin Stones", "Lantern Head", "Puffin Island", "the Black Reef"},
		"dir":    {"north", "south", "east", "west", "north-west", "south-west"},
		"tool":   {"ladder", "wheelbarrow", "big saw", "hammer", "lantern", "fishing net", "spade", "rake"},
		"veg":    {"beans", "peas", "carrots", "leeks", "onions", "potatoes", "cabbages", "turnips"},
		"flower": {"roses", "daisies", "poppies", "sunflowers", "tulips", "bluebells"},
		"pest":   {"slugs", "snails", "rabbits", "pigeons", "caterpillars"},
		"bird":   {"a robin", "a blackbird", "two swallows", "a pair of wrens", "a big grey heron", "a family of ducks"},
		"feel":   {"happy", "tired", "cheerful", "sleepy", "proud", "glad", "busy"},
		"adj":    {"kind", "clever", "busy", "shy", "cheerful", "grumpy", "sleepy", "brave", "curious", "patient", "careful", "forgetful", "tidy", "clumsy"},
		"news": {
			"found a hedgehog asleep in {P.his} boot",
			"painted {P.his} front door bright yellow",
			"fell into the duck pond and came out laughing",
			"baked a cake so big it would not fit through the door",
			"won a prize for the longest carrot in {town}",
			"taught {P.his} dog to carry the shopping",
			"mended the old clock in the tower, and now it rings on time",
			"saw a fox crossing the market in broad daylight",
			"built a little boat and sailed it across the pond",
			"planted a pear tree by the well",
			"lost {P.his} hat in the wind and found it on a cow",
			"sang three songs at the inn and everybody joined in",
		},
		"react": {"Well I never!", "How wonderful!", "That is just like {P.him}.",
			"I should like to have seen that.", "Oh, how funny.", "Good for {P.him}!"},
	}
}
