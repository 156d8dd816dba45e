package testdata

// foreignPathRecipes are the foreign layouts of paths and files: relative
// and file: locations, Hadoop sidecars.
var foreignPathRecipes = []ForeignRecipe{}
