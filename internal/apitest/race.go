//go:build race

package apitest

func init() { raceFlag = "-race" }
