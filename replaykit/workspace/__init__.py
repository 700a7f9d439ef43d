"""The user's workspace: `doctor` (is this machine ready?) and the scaffolds (`init`,
`tasks init`)."""
