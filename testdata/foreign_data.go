package testdata

// foreignDataRecipes are the foreign layouts of rows and schemas: migrated,
// name-mapped, evolved, defaults, cross-partition equality deletes.
var foreignDataRecipes = []ForeignRecipe{}
