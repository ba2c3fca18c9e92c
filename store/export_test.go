package store

// RowToUUID is rowToUUID, for the external tests.
var RowToUUID = rowToUUID
