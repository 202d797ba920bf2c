package messages

//go:generate bash gen.sh
