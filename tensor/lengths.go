package tensor

// LengthSuffix names the companion tensor of valid row lengths that padded
// batching (padded_batch, bucket_by_sequence_length) adds: "tokens" is
// padded along dimension 1 and "tokens_length" is an int32 [batch] tensor
// holding each row's real length. Bucketing writes it, the batch stream
// sends padded tensors without their padding because of it, and
// coordinated reads count tokens with it.
const LengthSuffix = "_length"

// LengthsName is the name of the lengths tensor of the padded tensor name.
func LengthsName(name string) string { return name + LengthSuffix }
